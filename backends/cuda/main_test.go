package cuda_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu"
)

// TestMain applies ZOO_CPU to the CPU backend the GPU results are compared with (CI runs
// `ZOO_CPU=avx2 go test ./backends/...`); a bad value stops the tests with exit 2.
func TestMain(m *testing.M) {
	if err := cpu.ApplyEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
