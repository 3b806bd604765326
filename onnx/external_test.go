package onnx

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// externalize moves the raw data of every initializer into one data file written at
// dir/dataName (after a 16-byte header, so offsets matter) and points the tensors at loc.
func externalize(t *testing.T, dir, dataName, loc string) []byte {
	t.Helper()
	var blob []byte
	blob = append(blob, make([]byte, 16)...)
	data := mutate(t, func(m *onnxpb.ModelProto) {
		for _, tp := range m.Graph.Initializer {
			off := len(blob)
			blob = append(blob, tp.RawData...)
			tp.ExternalData = []*onnxpb.StringStringEntryProto{
				{Key: "location", Value: loc},
				{Key: "offset", Value: itoa(off)},
				{Key: "length", Value: itoa(len(tp.RawData))},
			}
			tp.DataLocation = onnxpb.TensorProto_EXTERNAL
			tp.RawData = nil
		}
	})
	if dataName != "" {
		if err := os.WriteFile(filepath.Join(dir, dataName), blob, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

func itoa(n int) string { return strconv.Itoa(n) }

func writeModel(t *testing.T, dir string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A model with external data imports from its file with the same weights as the
// self-contained one; Import of the bytes alone says where the data is.
func TestImportFileExternalData(t *testing.T) {
	want, err := Import(mutate(t, func(*onnxpb.ModelProto) {}))
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{"weights.bin", "sub/weights.bin"} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		data := externalize(t, dir, loc, loc)
		got, err := ImportFile(writeModel(t, dir, data))
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		if len(got.Initializers) != len(want.Initializers) {
			t.Fatalf("%s: %d initializers, want %d", loc, len(got.Initializers), len(want.Initializers))
		}
		for i, in := range got.Initializers {
			if !tensor.Equal(in.Tensor, want.Initializers[i].Tensor) {
				t.Errorf("%s: initializer %q differs from the self-contained model's", loc, in.Name)
			}
		}
		if _, err := Import(data); err == nil || !strings.Contains(err.Error(), "external file") {
			t.Errorf("Import of bytes with external data: %v", err)
		}
	}
}

func TestImportFileRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.bin"), make([]byte, 1<<16), 0o644)
	cases := []struct {
		name, loc, want string
		setup           func(dir string)
	}{
		{"dot-dot", "../secret.bin", "outside the model's folder", nil},
		{"absolute", filepath.Join(outside, "secret.bin"), "absolute path", nil},
		{"symlink out", "link.bin", "link may not lead outside", func(dir string) {
			if err := os.Symlink(filepath.Join(outside, "secret.bin"), filepath.Join(dir, "link.bin")); err != nil {
				t.Skip("no symlinks here:", err)
			}
		}},
		{"missing", "absent.bin", "absent.bin", nil},
		{"past the end", "short.bin", "beyond the end", func(dir string) { os.WriteFile(filepath.Join(dir, "short.bin"), []byte{1, 2, 3}, 0o644) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.setup != nil {
				c.setup(dir)
			}
			_, err := ImportFile(writeModel(t, dir, externalize(t, dir, "", c.loc)))
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line containing %q", err, c.want)
			}
		})
	}
}

func TestImportNamesLFSPointer(t *testing.T) {
	ptr := "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"
	dir := t.TempDir()
	for _, imp := range []func() error{
		func() error { _, err := Import([]byte(ptr)); return err },
		func() error { _, err := ImportFile(writeModel(t, dir, []byte(ptr))); return err },
	} {
		if err := imp(); err == nil || !strings.Contains(err.Error(), "Git LFS pointer, not the model: run git lfs pull") {
			t.Errorf("got %v", err)
		}
	}
}

// ReadFile brings a model's external data into its bytes: Import of them equals ImportFile,
// and a model without external data comes back as the file holds it.
func TestReadFileInlinesExternalData(t *testing.T) {
	dir := t.TempDir()
	path := writeModel(t, dir, externalize(t, dir, "weights.bin", "weights.bin"))
	data, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Import(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ImportFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range got.Initializers {
		if !tensor.Equal(in.Tensor, want.Initializers[i].Tensor) {
			t.Errorf("initializer %q differs from ImportFile's", in.Name)
		}
	}
	plain := mutate(t, func(*onnxpb.ModelProto) {})
	path = writeModel(t, t.TempDir(), plain)
	if data, err := ReadFile(path); err != nil || !bytes.Equal(data, plain) {
		t.Errorf("a self-contained model: %d bytes, %v; want the file's %d", len(data), err, len(plain))
	}
	os.Remove(filepath.Join(dir, "weights.bin"))
	if _, err := ReadFile(filepath.Join(dir, "model.onnx")); err == nil || !strings.Contains(err.Error(), "weights.bin") {
		t.Errorf("missing data file: %v, want an error naming it", err)
	}
}
