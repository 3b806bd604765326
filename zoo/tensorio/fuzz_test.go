package tensorio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

func FuzzReadNPY(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.npy")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (32768, 65536), }", nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := ReadNPY(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := x.Check(); err != nil {
			t.Fatalf("ReadNPY returned an invalid tensor: %v", err)
		}
		// What reads must write back and read again identically.
		var buf bytes.Buffer
		if err := WriteNPY(&buf, x); err != nil {
			t.Fatal(err)
		}
		y, err := ReadNPY(&buf)
		if err != nil || !tensor.Equal(x, y) {
			t.Fatalf("re-read: %v", err)
		}
	})
}

func FuzzReadSafetensors(f *testing.F) {
	i64, _ := tensor.FromInt64([]int64{1, -2}, 2)
	b, _ := tensor.FromBool([]bool{true}, 1)
	var buf bytes.Buffer
	_ = WriteSafetensors(&buf, []Named{{"w", tensor.ScalarF(1.5)}, {"ids", i64}, {"mask", b}}, map[string]string{"k": "v"})
	f.Add(buf.Bytes())
	f.Add(stFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(stFile(`{"a":{"dtype":"F32","shape":[65536,32768],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, meta, err := ReadSafetensors(data)
		if err != nil {
			return
		}
		for _, nt := range list {
			if err := nt.Tensor.Check(); err != nil {
				t.Fatalf("%s: invalid tensor: %v", nt.Name, err)
			}
		}
		var out bytes.Buffer
		if err := WriteSafetensors(&out, list, meta); err != nil {
			t.Fatalf("cannot write back what was read: %v", err)
		}
		again, _, err := ReadSafetensors(out.Bytes())
		if err != nil || len(again) != len(list) {
			t.Fatalf("re-read: %v", err)
		}
		for i := range list {
			if again[i].Name != list[i].Name || !tensor.Equal(again[i].Tensor, list[i].Tensor) {
				t.Fatalf("tensor %q changed on re-read", list[i].Name)
			}
		}
	})
}

// FuzzReadWeights covers the weights readers: ReadWeightsFrom (F16, BF16 and F64 converted to
// float32) and ReadWeightsLimit, from a file and from a stream, which must agree: the same
// tensors, or both an error (the same one from a file), unless the budget refuses.
func FuzzReadWeights(f *testing.F) {
	i64, _ := tensor.FromInt64([]int64{1, -2}, 2)
	b, _ := tensor.FromBool([]bool{true}, 1)
	var buf bytes.Buffer
	_ = WriteSafetensors(&buf, []Named{{"w", mustF32(f, []float32{1.5, -2, 0.25, 3}, 2, 2)}, {"ids", i64}, {"mask", b}}, map[string]string{"format": "pt"})
	f.Add(buf.Bytes())
	half := []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c, 0x01, 0x00}         // F16: 1, -2, +Inf, the smallest subnormal
	bf := []byte{0x80, 0x3f, 0x00, 0xc0, 0xc0, 0x7f, 0x80, 0x00}           // BF16: 1, -2, NaN, 2^-126
	f64 := binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e-300)) // underflows float32
	f64 = binary.LittleEndian.AppendUint64(f64, math.Float64bits(math.Pi))
	f.Add(stFile(`{"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[4],"data_offsets":[8,16]},"d":{"dtype":"F64","shape":[2],"data_offsets":[16,32]},"__metadata__":{"format":"pt"}}`,
		append(append(half, bf...), f64...)))
	f.Add(stFile(`{"h":{"dtype":"F16","shape":[65536,32768],"data_offsets":[0,8]}}`, half))
	f.Add(stFile(`{"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"x":{"dtype":"I32","shape":[0],"data_offsets":[8,8]}}`, f64[:8]))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, meta, err := ReadWeightsFrom(bytes.NewReader(data))
		lim, lmeta, lerr := ReadWeightsLimit(bytes.NewReader(data), 1<<20)
		str, _, serr := ReadWeightsLimit(io.MultiReader(bytes.NewReader(data)), 1<<20)
		var be *BudgetError
		if errors.As(lerr, &be) {
			if !errors.As(serr, &be) {
				t.Fatalf("budget refused a file (%v) but not the stream (%v)", lerr, serr)
			}
			return
		}
		if (err == nil) != (lerr == nil) || (err != nil && err.Error() != lerr.Error()) {
			t.Fatalf("ReadWeightsFrom: %v\nReadWeightsLimit: %v", err, lerr)
		}
		if (err == nil) != (serr == nil) {
			t.Fatalf("ReadWeightsFrom: %v\nReadWeightsLimit on a stream: %v", err, serr)
		}
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if len(meta) != len(lmeta) || len(list) != len(lim) || len(list) != len(str) {
			t.Fatalf("%d tensors, %d with a budget, %d from a stream", len(list), len(lim), len(str))
		}
		for i, nt := range list {
			if err := nt.Tensor.Check(); err != nil {
				t.Fatalf("%s: invalid tensor: %v", nt.Name, err)
			}
			if nt.Tensor.DType.IsFloat() && nt.Tensor.DType != tensor.Float32 {
				t.Fatalf("%s: %v, want every float as float32", nt.Name, nt.Tensor.DType)
			}
			if lim[i].Name != nt.Name || !tensor.Equal(lim[i].Tensor, nt.Tensor) || str[i].Name != nt.Name || !tensor.Equal(str[i].Tensor, nt.Tensor) {
				t.Fatalf("tensor %q differs between the readers", nt.Name)
			}
		}
		// What reads as float32 writes back and reads again identically.
		var out bytes.Buffer
		if err := WriteSafetensors(&out, list, meta); err != nil {
			t.Fatalf("cannot write back what was read: %v", err)
		}
		again, _, err := ReadSafetensors(out.Bytes())
		if err != nil || len(again) != len(list) {
			t.Fatalf("re-read: %v", err)
		}
	})
}
