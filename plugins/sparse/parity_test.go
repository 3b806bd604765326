package sparse_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	_ "github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/plugins/sparse"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// regenerate is how the fixtures are made.
const regenerate = "/usr/bin/python3 plugins/sparse/testdata/gen_fixtures.py"

// fixture is one case written by testdata/gen_fixtures.py from the PyTorch implementation.
type fixture struct {
	name    string
	tensors []tensorio.Named
	meta    map[string]string
}

func loadFixture(t *testing.T, name string) fixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".safetensors"))
	if err != nil {
		t.Fatalf("read fixture (regenerate with %s): %v", regenerate, err)
	}
	ts, meta, err := tensorio.ReadSafetensors(data)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{name, ts, meta}
}

func (f fixture) get(t *testing.T, name string) *tensor.Tensor {
	t.Helper()
	x := tensorio.Lookup(f.tensors, name)
	if x == nil {
		t.Fatalf("fixture %s has no tensor %q", f.name, name)
	}
	return x
}

// config resolves the fixture's --set values; seed is the fixture's seed.
func (f fixture) config(t *testing.T) (variant.Config, uint64) {
	t.Helper()
	var sets map[string]any
	if err := json.Unmarshal([]byte(f.meta["set"]), &sets); err != nil {
		t.Fatalf("fixture %s: bad set metadata: %v", f.name, err)
	}
	var seed uint64
	fmt.Sscan(f.meta["seed"], &seed)
	cfg, err := variant.Resolve(sparse.New().Describe(), sets)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, seed
}

// buildFromFixture rebuilds the model the fixture was made from (same --set values and seed)
// and checks that its weights are the ones PyTorch loaded.
func buildFromFixture(t *testing.T, f fixture) *graph.Graph {
	t.Helper()
	cfg, seed := f.config(t)
	g, err := sparse.New().Build(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := weightsSHA256(t, g, f), f.meta["weights_sha256"]; got != want {
		t.Fatalf("weights differ from the ones PyTorch loaded: sha256 %s, fixture %s (initialisation changed? regenerate with %s)", got, want, regenerate)
	}
	return g
}

// weightsSHA256 hashes the state_dict exactly as `zoo export --weights` writes it.
func weightsSHA256(t *testing.T, g *graph.Graph, f fixture) string {
	t.Helper()
	sd := map[string]*tensor.Tensor{}
	for _, in := range g.Initializers {
		if !graph.IsConstName(in.Name) {
			sd[in.Name] = in.Tensor
		}
	}
	var buf bytes.Buffer
	if err := tensorio.WriteSafetensorsMap(&buf, sd, map[string]string{"variant": "sparse", "config": f.meta["config"], "seed": f.meta["seed"]}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// run compiles g on the cpu backend with the given thread count and runs the fixture's batch.
func run(t *testing.T, g *graph.Graph, f fixture, threads int) (map[string]*tensor.Tensor, error) {
	t.Helper()
	cpu, ok := backends.Lookup("cpu")
	if !ok {
		t.Fatal("cpu backend not registered")
	}
	prog, err := cpu.Compile(g, backends.Options{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	return prog.Run(context.Background(), map[string]*tensor.Tensor{nn.InputTokens: f.get(t, "tokens"), nn.InputKeyPadding: f.get(t, "key_padding_mask")})
}

// TestParityWithPyTorch compares hidden and logits with the independent PyTorch implementation
// (numpy-allclose style, absolute rule: |zoo - pytorch| <= 1e-5 on every valid position) for
// every sharing mode, the pre-LN/GELU/bias-free conventions and one base-sized layer, at every
// thread count from 1 to 3 (threads must not change the numbers by more than 1e-6).
func TestParityWithPyTorch(t *testing.T) {
	for _, name := range []string{"tiny", "tiny_global", "tiny_stride", "tiny_all", "tiny_prenorm", "tiny_long", "base_layer"} {
		t.Run(name, func(t *testing.T) {
			f := loadFixture(t, name)
			g := buildFromFixture(t, f)
			mask := f.get(t, "key_padding_mask")
			var first map[string]*tensor.Tensor
			for threads := 1; threads <= 3; threads++ {
				outs, err := run(t, g, f, threads)
				if err != nil {
					t.Fatal(err)
				}
				for _, out := range []string{nn.OutputHidden, nn.OutputLogits} {
					maxErr, at := compareValid(t, outs[out], f.get(t, out), mask)
					if maxErr > 1e-5 {
						t.Errorf("threads %d: %s differs from PyTorch by %.3g at %v (atol 1e-5)", threads, out, maxErr, at)
					}
					if threads == 1 {
						t.Logf("%s: max |zoo - pytorch| = %.3g on valid positions (smallest passing atol)", out, maxErr)
						continue
					}
					if d, at := compareValid(t, outs[out], first[out], mask); d > 1e-6 {
						t.Errorf("threads %d vs 1: %s differs by %.3g at %v", threads, out, d, at)
					}
				}
				if threads == 1 {
					first = outs
				}
			}
		})
	}
}

// compareValid returns the largest absolute difference over positions (b, i) whose mask entry
// is false (a real token), and its index.
func compareValid(t *testing.T, got, want, mask *tensor.Tensor) (float64, []int) {
	t.Helper()
	if !tensor.SameShape(got.Shape, want.Shape) {
		t.Fatalf("shape %v, want %v", got.Shape, want.Shape)
	}
	B, N, D := got.Shape[0], got.Shape[1], got.Shape[2]
	worst, at := 0.0, []int{}
	for b := 0; b < B; b++ {
		for i := 0; i < N; i++ {
			if mask.Bool[b*N+i] {
				continue
			}
			for j := 0; j < D; j++ {
				k := (b*N+i)*D + j
				d := math.Abs(float64(got.F32[k]) - float64(want.F32[k]))
				if d > worst || math.IsNaN(d) {
					worst, at = d, []int{b, i, j}
					if math.IsNaN(d) {
						return math.Inf(1), at
					}
				}
			}
		}
	}
	return worst, at
}
