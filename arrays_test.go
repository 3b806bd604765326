package zoo

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/internal/hostile"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestConvertTo(t *testing.T) {
	ints, _ := tensor.FromInt64([]int64{0, 1, 300}, 3)
	for _, c := range []struct {
		dt   tensor.DType
		in   *tensor.Tensor
		want string
	}{
		{tensor.Uint8, ints, "element 2 is 300, outside uint8's range"},
		{tensor.Bool, ints, "element 2 is 300; a bool input takes 0 or 1"},
		{tensor.Int64, tensor.ScalarF(1.5), "zoo does not convert float32 to int64; save the array as int64"},
	} {
		if _, err := convertTo(c.in, c.dt); err == nil || err.Error() != c.want {
			t.Errorf("convertTo(%v, %v) = %v, want %q", c.in.DType, c.dt, err, c.want)
		}
	}
	h, err := convertTo(tensor.ScalarF(1.0001), tensor.Float16)
	if err != nil || h.DType != tensor.Float16 || h.F32[0] != 1 {
		t.Errorf("float16: %v %v", h, err)
	}
	f, err := convertTo(ints, tensor.Float32)
	if err != nil || f.F32[2] != 300 || math.IsNaN(float64(f.F32[0])) {
		t.Errorf("int64 to float32: %v %v", f, err)
	}
}

// TestReadArraysBomb reads a 2 MiB .npz that inflates to 2 GiB in a child process whose
// memory guard counts 1 GiB (ZOO_MEMORY_LIMIT), and bounds the child's peak resident memory:
// the member is refused from its header (`zoo run --input bomb.npz` used to allow 1 TiB and
// reached 6.7 GB before it refused).
func TestReadArraysBomb(t *testing.T) {
	if v, _ := env.Get(env.TestChild); v == "read-arrays-bomb" {
		_, err := ReadArrays("bomb.npz", &graph.Graph{}, "m")
		peak, _ := hostile.PeakRSS()
		fmt.Printf("%d %v\n", peak, err)
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "bomb.npz")
	bomb, err := hostile.ZeroNPZ(map[string]int{"x": 512 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bomb, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadArraysBomb$")
	cmd.Env = append(os.Environ(), env.TestChild+"=read-arrays-bomb", env.MemoryLimit+"=1GiB")
	cmd.Dir = filepath.Dir(path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	peakS, msg, _ := strings.Cut(strings.TrimSuffix(string(out), "\n"), " ")
	if want := `input bomb.npz: npz: member "x.npy" takes 2.0 GiB in memory, more than the memory budget of 1.0 GiB (ZOO_MEMORY_LIMIT=1GiB)`; msg != want {
		t.Errorf("child said\n %q\nwant\n %q", msg, want)
	}
	peak, _ := strconv.ParseInt(peakS, 10, 64)
	t.Logf("%d-byte bomb refused at a peak resident memory of %d MiB", len(bomb), peak>>20)
	if peak <= 0 || peak > 200<<20 {
		t.Errorf("peak resident memory %d MiB, want under 200 MiB", peak>>20)
	}
}
