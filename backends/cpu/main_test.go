package cpu

import (
	"fmt"
	"os"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
)

// TestMain applies ZOO_CPU (CI runs `ZOO_CPU=avx2 go test ./backends/...` for each level);
// a bad value stops the tests with one line and exit 2, as it stops zoo.
func TestMain(m *testing.M) {
	if err := simd.ApplyEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
