// Command embed prints an embedding of each line of a file: go run ./examples/embed FILE
package main

import (
	"context"
	"fmt"
	"github.com/zoo-dev/zoo"
	"log"
	"os"
	"strings"
)

func main() {
	ctx := context.Background()
	data := must(os.ReadFile(os.Args[1]))
	m := must(zoo.Load(ctx, "vanilla.tiny", zoo.LoadOptions{}))
	defer m.Close()
	enc := must(m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean, Normalize: true}))
	lines := strings.FieldsFunc(string(data), func(r rune) bool { return r == '\n' })
	for i, v := range must(enc.Embed(ctx, lines...)) {
		fmt.Printf("%.3f %s\n", v[:3], lines[i])
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
