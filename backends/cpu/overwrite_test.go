package cpu_test

import (
	"context"
	"math"
	"testing"

	"github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// TestUnzeroedBuffers runs every built-in variant's tiny preset, in each run-time precision,
// on a program whose buffer pool hands out NaN-filled buffers and on a plain one, twice each
// (the second run recycles the first's buffers), and wants the same bits: a kernel that takes
// an unzeroed buffer (allocRaw, allocOverwrite) and leaves an element unwritten shows as a
// NaN, or as a value the plain program's zeroed memory does not give. The batch has a
// padded row, so masked paths run too.
func TestUnzeroedBuffers(t *testing.T) {
	reg, err := registry.Parse("registry.yaml", zoo.RegistryYAML)
	if err != nil {
		t.Fatal(err)
	}
	const batch, n = 2, 24
	ids := make([]int64, batch*n)
	pad := make([]bool, batch*n)
	for i := range ids {
		ids[i] = 1 + int64(i*7%50)
		pad[i] = i >= n && i%n >= n-5 // the second row's last 5 tokens are padding
	}
	feed := map[string]*tensor.Tensor{
		variant.InputTokens:     {DType: tensor.Int64, Shape: []int{batch, n}, I64: ids},
		variant.InputKeyPadding: {DType: tensor.Bool, Shape: []int{batch, n}, Bool: pad},
	}
	for name, v := range variants.Builtin() {
		e, _, err := reg.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := variant.Resolve(v.Describe(), e.Defaults, e.Presets["tiny"])
		if err != nil {
			t.Fatal(err)
		}
		g, err := v.Build(context.Background(), cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, precision := range []string{"fp32", "bf16", "int8", "int8-attention"} {
			// run returns nil where the CPU refuses the precision (bf16 without AVX512-BF16)
			run := func(poison bool) map[string]*tensor.Tensor {
				p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2, Precision: precision})
				if err != nil && precision == "bf16" {
					return nil
				}
				if err != nil {
					t.Fatalf("%s %s: %v", name, precision, err)
				}
				defer p.Close()
				if poison {
					cpu.PoisonBuffers(p.(*cpu.Program))
				}
				var outs map[string]*tensor.Tensor
				for range 2 {
					if outs, err = p.Run(context.Background(), feed); err != nil {
						t.Fatalf("%s %s: %v", name, precision, err)
					}
				}
				return outs
			}
			want := run(false)
			if want == nil {
				continue
			}
			got := run(true)
			for k, w := range want {
				for i, x := range got[k].F32 {
					if math.Float32bits(x) != math.Float32bits(w.F32[i]) {
						t.Errorf("%s %s: %s[%d] is %v from NaN-filled buffers, %v from zeroed ones", name, precision, k, i, x, w.F32[i])
						break
					}
				}
			}
		}
	}
}
