package onnx

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
)

// FuzzImport feeds Import real models (zoo's own export and PyTorch's), truncations of them
// and garbage. Import must never panic; an accepted model must validate and survive an
// export/import round trip; a rejected one must give a one-line error.
//
//	go test ./onnx -run '^$' -fuzz FuzzImport -fuzztime 60s -fuzzminimizetime 5s
func FuzzImport(f *testing.F) {
	zoo, err := Export(testGraph(f), ExportOptions{})
	if err != nil {
		f.Fatal(err)
	}
	seeds := [][]byte{zoo, zoo[:len(zoo)/3], zoo[:len(zoo)-1], nil, []byte("\x08\x08"), []byte("garbage, not protobuf \xff\xff\xff")}
	// Seeds stay small: the fuzzer minimises every new interesting input, which takes
	// minutes for the 300 KB encoder fixtures.
	tiny, err := os.ReadFile("testdata/tiny_layer_op17.onnx")
	if err != nil {
		f.Fatal(err)
	}
	seeds = append(seeds, tiny, tiny[:len(tiny)/2], tiny[:1024],
		einsumModel(f, "Einsum", "...id,jd->...ij", [][]int64{{2, 3, 5, 4}, {6, 4}}),
		einsumModel(f, "Einsum", "nlhd,nhmd,nlh->nlhm", [][]int64{{2, 5, 3, 4}, {2, 3, 6, 4}, {2, 5, 3}}))
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Import(data)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "import onnx: ") {
				t.Fatalf("error is not one line starting with 'import onnx: ': %q", msg)
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("accepted graph does not validate: %v", err)
		}
		out, err := Export(g, ExportOptions{})
		if err != nil {
			// Export is stricter about opset-specific ops (LayerNormalization below 17).
			if strings.Contains(err.Error(), "needs opset 17") {
				return
			}
			t.Fatalf("accepted graph does not export: %v", err)
		}
		if _, err := Import(out); err != nil {
			t.Fatalf("re-import of an accepted graph failed: %v", err)
		}
	})
}

// FuzzImportExternal imports models whose tensors keep their data in external files, from a
// folder that holds data files, a sub-folder, and links that lead outside it (FuzzImport
// passes bytes alone, which never reach the external-data reader). Import must never panic;
// an error is one line; an accepted graph validates and exports. (TestImportFileExternalData
// checks that the links and paths out of the folder are refused.)
//
//	go test ./onnx -run '^$' -fuzz FuzzImportExternal -fuzztime 60s -fuzzminimizetime 5s
func FuzzImportExternal(f *testing.F) {
	base, err := Export(testGraph(f), ExportOptions{})
	if err != nil {
		f.Fatal(err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(base, &m); err != nil {
		f.Fatal(err)
	}
	// The folder: the weights at offset 16 of weights.bin and of sub/w.bin, links to an
	// outside file and to the outside folder.
	dir, outside := f.TempDir(), f.TempDir()
	blob := make([]byte, 16)
	for _, tp := range m.Graph.Initializer {
		blob = append(blob, tp.RawData...)
	}
	secret := []byte("outside the model's folder")
	for p, data := range map[string][]byte{
		filepath.Join(dir, "weights.bin"):      blob,
		filepath.Join(dir, "sub", "w.bin"):     blob,
		filepath.Join(outside, "secret.bin"):   secret,
		filepath.Join(outside, "weights.bin"):  secret,
		filepath.Join(dir, "empty.bin"):        nil,
		filepath.Join(dir, "sub", "short.bin"): blob[:20],
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "secret.bin"), filepath.Join(dir, "link.bin")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		f.Fatal(err)
	}
	external := func(loc string, withOffsets bool) []byte {
		mm := proto.Clone(&m).(*onnxpb.ModelProto)
		off := 16
		for _, tp := range mm.Graph.Initializer {
			kv := []*onnxpb.StringStringEntryProto{{Key: "location", Value: loc}}
			if withOffsets {
				kv = append(kv, &onnxpb.StringStringEntryProto{Key: "offset", Value: strconv.Itoa(off)},
					&onnxpb.StringStringEntryProto{Key: "length", Value: strconv.Itoa(len(tp.RawData))})
			}
			off += len(tp.RawData)
			tp.ExternalData, tp.DataLocation, tp.RawData = kv, onnxpb.TensorProto_EXTERNAL, nil
		}
		out, err := proto.Marshal(mm)
		if err != nil {
			f.Fatal(err)
		}
		return out
	}
	for _, loc := range []string{"weights.bin", "sub/w.bin", "sub/./w.bin", "link.bin", "out/weights.bin", "../weights.bin",
		"/etc/passwd", "sub/short.bin", "empty.bin", "missing.bin", "sub"} {
		f.Add(external(loc, true))
	}
	f.Add(external("weights.bin", false))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := importModelIn(data, dir)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("accepted graph does not validate: %v", err)
		}
		if _, err := Export(g, ExportOptions{}); err != nil && !strings.Contains(err.Error(), "needs opset 17") {
			t.Fatalf("accepted graph does not export: %v", err)
		}
	})
}
