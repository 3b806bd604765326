package optim

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// fuzzOptimizers are the three optimizer states a checkpoint can hold, over one small layout.
func fuzzOptimizer(t testing.TB, kind uint8) *Optimizer {
	layout, err := NewLayout([]string{"w", "layers.0.b"}, [][]int{{2, 3}, {3}})
	if err != nil {
		t.Fatal(err)
	}
	h := []Hyper{DefaultHyper(), {Optimizer: SGD, Momentum: 0.9}, {Optimizer: SGD}}[int(kind)%3]
	o, err := New(h, layout, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// FuzzReadState reads any bytes as a .optim.safetensors file (the optimizer half of a
// checkpoint that --resume reads) into each kind of optimizer: it must restore them or refuse
// with one line, and what it restores must write back and read again identically.
func FuzzReadState(f *testing.F) {
	for kind := uint8(0); kind < 3; kind++ {
		o := fuzzOptimizer(f, kind)
		o.step = 7
		for _, buf := range o.stateBufs() {
			for i := range buf {
				buf[i] = float32(i) - 2.5
			}
		}
		var b bytes.Buffer
		if err := o.WriteState(&b, map[string]string{"zoo_train": `{"lr":0.001}`}); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes(), kind)
		f.Add(b.Bytes(), kind+1) // another optimizer's state: refused
	}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		o := fuzzOptimizer(t, kind)
		meta, err := o.ReadState(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if o.step < 0 || meta[MetaStep] == "" {
			t.Fatalf("step %d, metadata %v", o.step, meta)
		}
		var b bytes.Buffer
		if err := o.WriteState(&b, nil); err != nil {
			t.Fatalf("cannot write back what was read: %v", err)
		}
		again := fuzzOptimizer(t, kind)
		if _, err := again.ReadState(b.Bytes()); err != nil || again.step != o.step {
			t.Fatalf("re-read: %v (step %d, was %d)", err, again.step, o.step)
		}
		for s, buf := range o.stateBufs() {
			for i, v := range buf {
				if w := again.stateBufs()[s][i]; v != w && !(math.IsNaN(float64(v)) && math.IsNaN(float64(w))) {
					t.Fatalf("state %d[%d]: %v, re-read %v", s, i, v, w)
				}
			}
		}
	})
}

// FuzzLoadCheckpoint reads a checkpoint pair from disk as --resume does: the model file and
// the optimizer file (the fuzzer's two inputs) and, when present, the pending state of an
// interrupted save. It must load them or refuse with one line naming a file.
func FuzzLoadCheckpoint(f *testing.F) {
	dir := f.TempDir()
	o := fuzzOptimizer(f, 0)
	o.step = 3
	model := filepath.Join(dir, "m.safetensors")
	w, _ := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err := SaveCheckpoint(model, StateDict{{Name: "w", Tensor: w}}, map[string]string{"zoo_train": `{"lr":0.001}`}, o, nil); err != nil {
		f.Fatal(err)
	}
	md, _ := os.ReadFile(model)
	od, _ := os.ReadFile(OptimPath(model))
	f.Add(md, od, false)
	f.Add(md, od, true)
	f.Add(md, md, false)
	d := f.TempDir() // one per worker process, whose inputs run one at a time
	f.Fuzz(func(t *testing.T, modelData, optimData []byte, pending bool) {
		p := filepath.Join(d, "m.safetensors")
		op := OptimPath(p)
		os.Remove(op)
		os.Remove(op + pendingSuffix)
		if pending {
			op += pendingSuffix
		}
		if err := os.WriteFile(p, modelData, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(op, optimData, 0o644); err != nil {
			t.Fatal(err)
		}
		list, meta, ometa, err := LoadCheckpoint(p, fuzzOptimizer(t, 0))
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, d) {
				t.Fatalf("error is not one line naming a file: %q", msg)
			}
			return
		}
		if meta[MetaStep] != ometa[MetaStep] {
			t.Fatalf("loaded a torn pair: steps %q and %q", meta[MetaStep], ometa[MetaStep])
		}
		for _, nt := range list {
			if err := nt.Tensor.Check(); err != nil {
				t.Fatalf("%s: %v", nt.Name, err)
			}
		}
		_ = tensorio.Lookup(list, "w")
	})
}
