package zoo_test

import (
	"context"
	"fmt"
	"log"
	"math"

	"github.com/zoo-dev/zoo"
)

// Load builds a variant of the registry in process, with its deterministic weights.
func ExampleLoad() {
	ctx := context.Background()
	m, err := zoo.Load(ctx, "vanilla.tiny", zoo.LoadOptions{Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	info := m.Info()
	fmt.Println(info.Name, info.Parameters, "parameters, max length", info.MaxLen)
	for _, in := range info.Inputs {
		fmt.Println("input", in.Name, in.DType, "fed", in.Role)
	}
	fmt.Println("weights:", info.Weights)
	// Output:
	// vanilla.tiny 100097 parameters, max length 5000
	// input tokens int64 fed ids
	// input key_padding_mask bool fed padding
	// weights: random (seed 1)
}

// Embed gives one vector per text: here mean-pooled and L2-normalised, as
// sentence-transformers' encode does.
func ExampleEncoder_Embed() {
	ctx := context.Background()
	m, err := zoo.Load(ctx, "vanilla.tiny", zoo.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	enc, err := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean, Normalize: true})
	if err != nil {
		log.Fatal(err)
	}
	vecs, err := enc.Embed(ctx, "The cat sat on the mat.", "A dog slept in the sun.")
	if err != nil {
		log.Fatal(err)
	}
	var dot, norm float64
	for k := range vecs[0] {
		dot += float64(vecs[0][k]) * float64(vecs[1][k])
		norm += float64(vecs[0][k]) * float64(vecs[0][k])
	}
	fmt.Printf("%d vectors of %d, norm %.3f, cosine %.2f\n", len(vecs), len(vecs[0]), math.Sqrt(norm), dot)
	// Output:
	// 2 vectors of 64, norm 1.000, cosine 0.91
}
