package tensorio

import (
	"archive/zip"
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The archives were written by np.savez and np.savez_compressed (testdata/make_golden.py).
func TestReadNPZ(t *testing.T) {
	b, err := os.ReadFile("testdata/two.npz")
	if err != nil {
		t.Fatal(err)
	}
	list, err := ReadNPZ(bytes.NewReader(b), int64(len(b)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := tensor.FromInt64([]int64{7, 8, 9}, 3)
	want := []Named{{"ids", ids}, {"x", mustF32(t, []float32{1.5, -2, 0, 3}, 2, 2)}}
	if len(list) != len(want) {
		t.Fatalf("got %d arrays, want %d", len(list), len(want))
	}
	for i, w := range want {
		if list[i].Name != w.Name || !tensor.Equal(list[i].Tensor, w.Tensor) {
			t.Errorf("array %d = %s %+v, want %s %+v", i, list[i].Name, list[i].Tensor, w.Name, w.Tensor)
		}
	}
	z, err := os.ReadFile("testdata/zeros_compressed.npz")
	if err != nil {
		t.Fatal(err)
	}
	list, err = ReadNPZ(bytes.NewReader(z), int64(len(z)), 1<<20)
	if err != nil || len(list) != 1 || list[0].Name != "z" || list[0].Tensor.DType != tensor.Float16 || !tensor.SameShape(list[0].Tensor.Shape, []int{64, 64}) {
		t.Fatalf("compressed: %v, %v", list, err)
	}
	// 8 KiB of float16 inflates from a 237-byte file and takes 16 KiB as float32: a budget
	// below that refuses it up front.
	if _, err := ReadNPZ(bytes.NewReader(z), int64(len(z)), 4096); err == nil || err.Error() != `npz: member "z.npy" takes 16.0 KiB in memory, more than the memory budget of 4.0 KiB` {
		t.Errorf("limit: %v", err)
	}
}

func zipOf(t testing.TB, members map[string][]byte) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, data := range members {
		f, err := w.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadNPZErrors(t *testing.T) {
	okNPY := npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", make([]byte, 4))
	corrupt, _ := os.ReadFile("testdata/two.npz")
	corrupt = bytes.Clone(corrupt)
	// Flip a data byte of the first (stored) member: its checksum no longer matches.
	i := bytes.Index(corrupt, []byte("NUMPY"))
	hdrEnd := bytes.IndexByte(corrupt[i:], '\n')
	corrupt[i+hdrEnd+2] ^= 0xff
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"not zip", okNPY, "npz: not a .npz (zip) archive: zip: not a valid zip file"},
		{"not npy member", zipOf(t, map[string][]byte{"a.txt": []byte("hi")}), `npz: member "a.txt" is not a .npy array`},
		{"bad array", zipOf(t, map[string][]byte{"a.npy": []byte("hi")}), `npz: member "a.npy": npy: reading magic: unexpected EOF`},
		{"trailing", zipOf(t, map[string][]byte{"a.npy": append(bytes.Clone(okNPY), 0)}), `npz: member "a.npy": npy: shape [1] of float32 needs 4 data bytes, member has 5`},
		{"checksum", corrupt, `npz: member "x.npy": reading past the array: zip: checksum error`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadNPZ(bytes.NewReader(tc.in), int64(len(tc.in)), 1<<20)
			if err == nil || err.Error() != tc.want {
				t.Errorf("ReadNPZ error =\n %v\nwant\n %s", err, tc.want)
			}
		})
	}
}

func FuzzReadNPZ(f *testing.F) {
	for _, p := range []string{"testdata/two.npz", "testdata/zeros_compressed.npz"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ReadNPZ(bytes.NewReader(data), int64(len(data)), 1<<20)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		for _, nt := range list {
			if err := nt.Tensor.Check(); err != nil {
				t.Fatalf("%s: invalid tensor: %v", nt.Name, err)
			}
		}
	})
}
