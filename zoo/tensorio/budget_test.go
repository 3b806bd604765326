package tensorio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/internal/hostile"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func bombNPZ(t testing.TB, members map[string]int) []byte {
	b, err := hostile.ZeroNPZ(members)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadNPZBudget(t *testing.T) {
	bomb := bombNPZ(t, map[string]int{"x": 16 << 20}) // 64 MiB of zeros in about 64 KiB
	var be *BudgetError
	_, err := ReadNPZ(bytes.NewReader(bomb), int64(len(bomb)), 32<<20)
	if !errors.As(err, &be) || err.Error() != `npz: member "x.npy" takes 64.0 MiB in memory, more than the memory budget of 32.0 MiB` {
		t.Fatalf("bomb: %v", err)
	}
	// Members are summed: the one that crosses the budget is named with the total.
	two := bombNPZ(t, map[string]int{"a": 1 << 20, "b": 1 << 20})
	if _, err := ReadNPZ(bytes.NewReader(two), int64(len(two)), 6<<20); err == nil || err.Error() != `npz: member "b.npy" takes 4.0 MiB in memory, which brings the arrays to 8.0 MiB, more than the memory budget of 6.0 MiB` {
		t.Fatalf("two: %v", err)
	}
	if list, err := ReadNPZ(bytes.NewReader(two), int64(len(two)), 8<<20); err != nil || len(list) != 2 ||
		list[1].Name != "b" || len(list[1].Tensor.F32) != 1<<20 || list[1].Tensor.F32[1<<20-1] != 0 {
		t.Fatalf("two within the budget: %v", err)
	}
	three := bombNPZ(t, map[string]int{"c": 3 << 18}) // three segments
	if list, err := ReadNPZ(bytes.NewReader(three), int64(len(three)), 8<<20); err != nil || len(list) != 1 || len(list[0].Tensor.F32) != 3<<18 {
		t.Fatalf("three segments: %v", err)
	}
	// int8 is held as int64: 1 MiB in the file is 8 MiB in memory.
	i8, _ := tensor.New(tensor.Int8, 1<<20)
	var npy bytes.Buffer
	if err := WriteNPY(&npy, i8); err != nil {
		t.Fatal(err)
	}
	z := zipOf(t, map[string][]byte{"ids.npy": npy.Bytes()})
	if _, err := ReadNPZ(bytes.NewReader(z), int64(len(z)), 4<<20); err == nil || err.Error() != `npz: member "ids.npy" takes 8.0 MiB in memory, more than the memory budget of 4.0 MiB` {
		t.Fatalf("int8: %v", err)
	}
	// A member whose zip entry declares less data than its array is refused before inflating.
	short := zipOf(t, map[string][]byte{"a.npy": npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", make([]byte, 8))})
	if _, err := ReadNPZ(bytes.NewReader(short), int64(len(short)), 1<<20); err == nil || err.Error() != `npz: member "a.npy": npy: shape [1000] of float32 needs 4000 data bytes, member has 8` {
		t.Fatalf("short: %v", err)
	}
}

func TestReadNPYLimit(t *testing.T) {
	x := mustF32(t, make([]float32, 1024), 32, 32)
	var buf bytes.Buffer
	if err := WriteNPY(&buf, x); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadNPYLimit(bytes.NewReader(buf.Bytes()), 1000); err == nil || err.Error() != "npy: array float32 [32 32] takes 4.0 KiB in memory, more than the memory budget of 1000 B" {
		t.Fatalf("over: %v", err)
	}
	for _, r := range []io.Reader{bytes.NewReader(buf.Bytes()), io.MultiReader(bytes.NewReader(buf.Bytes()))} {
		got, err := ReadNPYLimit(r, 4096)
		if err != nil || !tensor.Equal(got, x) {
			t.Fatalf("within: %v", err)
		}
	}
}

func TestReadWeightsLimit(t *testing.T) {
	i64, _ := tensor.FromInt64([]int64{1, -2, 3}, 3)
	b, _ := tensor.FromBool([]bool{true, false}, 2)
	list := []Named{{"w", mustF32(t, make([]float32, 256), 16, 16)}, {"ids", i64}, {"mask", b}}
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, list, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	// F16 is held as float32: twice its size in the file.
	half := stFile(`{"h":{"dtype":"F16","shape":[1024],"data_offsets":[0,2048]}}`, make([]byte, 2048))
	for _, r := range []func([]byte) io.Reader{
		func(b []byte) io.Reader { return bytes.NewReader(b) },
		func(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b)) }, // a stream
	} {
		got, meta, err := ReadWeightsLimit(r(buf.Bytes()), 2048)
		want, wmeta, werr := ReadWeightsFrom(bytes.NewReader(buf.Bytes()))
		if err != nil || werr != nil || len(got) != 3 || meta["k"] != "v" || wmeta["k"] != "v" {
			t.Fatalf("within: %v %v", err, werr)
		}
		for i := range got {
			if got[i].Name != want[i].Name || !tensor.Equal(got[i].Tensor, want[i].Tensor) {
				t.Errorf("%s differs from ReadWeightsFrom's", got[i].Name)
			}
		}
		if _, _, err := ReadWeightsLimit(r(buf.Bytes()), 1024); err == nil || err.Error() != `safetensors: tensor "w" takes 1.0 KiB in memory, which brings the arrays to 1.0 KiB (1048 bytes), more than the memory budget of 1.0 KiB (1024 bytes)` {
			t.Errorf("over: %v", err)
		}
		if _, _, err := ReadWeightsLimit(r(half), 4095); err == nil || err.Error() != `safetensors: tensor "h" takes 4.0 KiB (4096 bytes) in memory, more than the memory budget of 4.0 KiB (4095 bytes)` {
			t.Errorf("f16: %v", err)
		}
	}
	// A stream that ends before its tensors do, or goes on after them.
	trunc := stFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, make([]byte, 8))
	if _, _, err := ReadWeightsLimit(io.MultiReader(bytes.NewReader(trunc)), 1<<20); err == nil || err.Error() != `safetensors: tensor "a": reading data: unexpected EOF` {
		t.Errorf("truncated stream: %v", err)
	}
	long := stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8))
	if _, _, err := ReadWeightsLimit(io.MultiReader(bytes.NewReader(long)), 1<<20); err == nil || err.Error() != "safetensors: bytes after the last tensor (tensors cover 4)" {
		t.Errorf("long stream: %v", err)
	}
}

// TestNPZBombPeakMemory reads a 2 MiB .npz that inflates to 2 GiB in a child process under a
// 1 GiB budget, and bounds the child's peak resident memory: the bomb is refused from its
// header, long before 200 MiB (reading it whole took 6.7 GB).
func TestNPZBombPeakMemory(t *testing.T) {
	if v, _ := env.Get(env.TestChild); v == "npz-bomb" {
		path := "bomb.npz"
		f, err := os.Open(path)
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		st, _ := f.Stat()
		_, err = ReadNPZ(f, st.Size(), 1<<30)
		peak, _ := hostile.PeakRSS()
		fmt.Printf("%d %v\n", peak, err)
		os.Exit(0)
	}
	if testing.Short() {
		t.Skip("writes a 2 MiB archive of 2 GiB of zeros")
	}
	path := filepath.Join(t.TempDir(), "bomb.npz")
	bomb := bombNPZ(t, map[string]int{"x": 512 << 20})
	if err := os.WriteFile(path, bomb, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNPZBombPeakMemory$")
	cmd.Env = append(os.Environ(), env.TestChild+"=npz-bomb")
	cmd.Dir = filepath.Dir(path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	peakS, msg, _ := strings.Cut(strings.TrimSuffix(string(out), "\n"), " ")
	if want := `npz: member "x.npy" takes 2.0 GiB in memory, more than the memory budget of 1.0 GiB`; msg != want {
		t.Errorf("child said %q, want %q", msg, want)
	}
	peak, _ := strconv.ParseInt(peakS, 10, 64)
	t.Logf("%d-byte bomb refused at a peak resident memory of %d MiB", len(bomb), peak>>20)
	if peak <= 0 || peak > 200<<20 {
		t.Errorf("peak resident memory %d MiB, want under 200 MiB", peak>>20)
	}
}
