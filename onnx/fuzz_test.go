package onnx

import (
	"os"
	"strings"
	"testing"
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
