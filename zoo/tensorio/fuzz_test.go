package tensorio

import (
	"bytes"
	"os"
	"path/filepath"
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
