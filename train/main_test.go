package train_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu"
)

// TestMain applies ZOO_CPU, so that `ZOO_CPU=generic go test ./train` checks the examples'
// output at each kernel level.
func TestMain(m *testing.M) {
	if err := cpu.ApplyEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
