package cpu

import (
	"fmt"
	"os"
	"testing"
)

// TestMain applies ZOO_CPU (CI runs `ZOO_CPU=avx2 go test ./backends/...` for each level)
// and ZOO_INT8 (so benchmarks run on the int8 path named, as zoo does); a bad value stops
// the tests with one line and exit 2, as it stops zoo.
func TestMain(m *testing.M) {
	if err := ApplyEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
