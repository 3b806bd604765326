package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/variant"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// maxOutputBytes bounds what `zoo run --output` gathers in memory before writing.
const maxOutputBytes = 4 << 30

// outputSink gathers a run's outputs, window by window, and writes them atomically at the end.
// Outputs are laid out (windows, n, dim) with n the longest window; positions past a window's
// length are zero.
type outputSink interface {
	begin(m *model, rep runReport, windows, n int) error
	add(b *tokenize.Batch, outs map[string]*tensor.Tensor) error
	finish(path string) ([]string, error)
	shapes() map[string][]int
}

// newSink picks the writer from the file extension.
func newSink(path, selected string) (outputSink, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json", ".safetensors":
		return &gather{format: ext}, nil
	case ".npy":
		if selected != variant.OutputHidden && selected != variant.OutputLogits {
			return nil, fmt.Errorf("--select %q: want hidden or logits", selected)
		}
		return &gather{format: ext, only: selected}, nil
	default:
		return nil, fmt.Errorf("output %s: unknown format %q; use .json, .npy or .safetensors", path, ext)
	}
}

type gather struct {
	format, only string
	model        string
	backend      string
	windows, n   int
	next         int
	tokens       []int64
	lengths      []int64
	offsets      []int64
	outs         map[string]*tensor.Tensor
	order        []string
}

func (g *gather) begin(m *model, rep runReport, windows, n int) error {
	g.model, g.backend = rep.Model, rep.Backend+" ("+rep.Level+")"
	g.windows, g.n = windows, n
	g.tokens = make([]int64, windows*n)
	g.lengths = make([]int64, windows)
	g.offsets = make([]int64, windows)
	g.outs = map[string]*tensor.Tensor{}
	var bytes int64
	for _, o := range m.Graph.Outputs {
		if g.only != "" && o.Name != g.only {
			continue
		}
		if len(o.Shape) > 0 && o.Shape[len(o.Shape)-1].Known() {
			bytes += int64(windows) * int64(n) * o.Shape[len(o.Shape)-1].Size * 4
		}
	}
	if bytes > maxOutputBytes {
		return fmt.Errorf("the outputs would take %.1f GiB; use --max-windows, a .npy file with --select, or no --output", float64(bytes)/(1<<30))
	}
	return nil
}

func (g *gather) add(b *tokenize.Batch, outs map[string]*tensor.Tensor) error {
	names := make([]string, 0, len(outs))
	for name := range outs {
		if g.only == "" || name == g.only {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		t := outs[name]
		if t.DType != tensor.Float32 || len(t.Shape) != 3 || t.Shape[0] != b.B || t.Shape[1] != b.N {
			return fmt.Errorf("output %s has shape %v, want (%d, %d, dim) float32", name, t.Shape, b.B, b.N)
		}
		dst, ok := g.outs[name]
		if !ok {
			var err error
			if dst, err = tensor.New(tensor.Float32, g.windows, g.n, t.Shape[2]); err != nil {
				return fmt.Errorf("output %s: %w", name, err)
			}
			g.outs[name] = dst
			g.order = append(g.order, name)
		}
		dim := t.Shape[2]
		for i := 0; i < b.B; i++ {
			l := b.Lengths[i]
			copy(dst.F32[(g.next+i)*g.n*dim:], t.F32[i*b.N*dim:(i*b.N+l)*dim])
		}
	}
	for i := 0; i < b.B; i++ {
		copy(g.tokens[(g.next+i)*g.n:], b.Row(i))
		g.lengths[g.next+i] = int64(b.Lengths[i])
		g.offsets[g.next+i] = b.Offsets[i]
	}
	g.next += b.B
	return nil
}

func (g *gather) shapes() map[string][]int {
	out := map[string][]int{}
	for name, t := range g.outs {
		out[name] = t.Shape
	}
	return out
}

// trim drops windows that were never filled (the input ended before the estimate).
func (g *gather) trim() {
	if g.next == g.windows {
		return
	}
	for _, t := range g.outs {
		t.Shape[0] = g.next
		t.F32 = t.F32[:g.next*g.n*t.Shape[2]]
	}
	g.tokens, g.lengths, g.offsets, g.windows = g.tokens[:g.next*g.n], g.lengths[:g.next], g.offsets[:g.next], g.next
}

func (g *gather) finish(path string) ([]string, error) {
	g.trim()
	write := func(w io.Writer) error {
		switch g.format {
		case ".npy":
			return tensorio.WriteNPY(w, g.outs[g.only])
		case ".safetensors":
			named := map[string]*tensor.Tensor{
				"tokens":  {DType: tensor.Int64, Shape: []int{g.windows, g.n}, I64: g.tokens},
				"lengths": {DType: tensor.Int64, Shape: []int{g.windows}, I64: g.lengths},
				"offsets": {DType: tensor.Int64, Shape: []int{g.windows}, I64: g.offsets},
			}
			for name, t := range g.outs {
				named[name] = t
			}
			return tensorio.WriteSafetensorsMap(w, named, map[string]string{
				"model": g.model, "backend": g.backend, "tokenizer": tokenizerDoc,
			})
		default:
			return g.writeJSON(w)
		}
	}
	if err := tensorio.AtomicWriteFile(path, write); err != nil {
		return nil, err
	}
	return []string{path}, nil
}

// tokenizerDoc documents the id mapping in every output file.
const tokenizerDoc = "byte-level: id 0 = padding, byte b = id b+1 (vocab 257)"

// writeJSON streams the JSON document; data arrays are flat and row-major, with shapes.
func (g *gather) writeJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	head := map[string]any{
		"model": g.model, "backend": g.backend,
		"tokenizer": map[string]any{"kind": "bytes", "pad_id": tokenize.PadID, "vocab": tokenize.VocabSize, "mapping": tokenizerDoc},
		"lengths":   g.lengths, "offsets": g.offsets,
	}
	hb, err := json.Marshal(head)
	if err != nil {
		return err
	}
	bw.Write(hb[:len(hb)-1])
	fmt.Fprintf(bw, `,"tokens":{"shape":[%d,%d],"data":`, g.windows, g.n)
	writeInts(bw, g.tokens)
	bw.WriteString(`},"outputs":{`)
	for i, name := range g.order {
		t := g.outs[name]
		if i > 0 {
			bw.WriteByte(',')
		}
		sb, _ := json.Marshal(t.Shape)
		fmt.Fprintf(bw, `%q:{"shape":%s,"data":`, name, sb)
		writeFloats(bw, t.F32)
		bw.WriteByte('}')
	}
	bw.WriteString("}}\n")
	return bw.Flush()
}

func writeInts(w *bufio.Writer, v []int64) {
	w.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			w.WriteByte(',')
		}
		fmt.Fprint(w, x)
	}
	w.WriteByte(']')
}

// writeFloats writes float32 values in the shortest form that reads back to the same float32.
func writeFloats(w *bufio.Writer, v []float32) {
	var buf []byte
	w.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			w.WriteByte(',')
		}
		buf = format.AppendFloat32(buf[:0], x)
		w.Write(buf)
	}
	w.WriteByte(']')
}
