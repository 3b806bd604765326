// Package paritytest is what the in-tree variants' parity tests (variants/<name>/parity_test.go)
// share. Each variant's testdata/gen_fixtures.py asks zoo for a case's weights
// (`zoo export NAME --weights`), runs them through an independent PyTorch implementation and
// writes the padded batch, PyTorch's hidden and logits, and metadata (the --set values, the
// seed, zoo's resolved config and the sha256 of the weights file) to testdata/<case>.safetensors.
// The parity test loads each fixture, rebuilds the model from its metadata, checks that the
// config resolves as recorded and that its weights hash to the recorded sha256 (so PyTorch ran
// the very same model and weights), runs the batch on
// the CPU backend at 1 to 3 threads and compares hidden and logits on valid (non-padded)
// positions at atol 1e-5; thread counts must not change the numbers by more than 1e-6.
package paritytest

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
	_ "github.com/zoo-dev/zoo/backends/cpu" // the backend the parity tests run on
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Tolerances: Atol bounds |zoo - pytorch| on valid positions; ThreadAtol bounds the difference
// between a run at more threads and the single-threaded run.
const (
	Atol       = 1e-5
	ThreadAtol = 1e-6
)

// MaxThreads is the largest thread count the parity runs use (they run at 1..MaxThreads).
const MaxThreads = 3

// Fixture is one case written by a variant's testdata/gen_fixtures.py.
type Fixture struct {
	// Name is the case's name, the file name without .safetensors.
	Name string
	// Tensors are the fixture's tensors: tokens, key_padding_mask, hidden, logits and any
	// variant-specific extras.
	Tensors []tensorio.Named
	// Meta is the fixture's metadata: set (JSON of the --set values), seed, config,
	// weights_sha256, torch and any variant-specific extras.
	Meta map[string]string
	// Regenerate is the command that writes the fixture, for error messages.
	Regenerate string
}

// Regenerate returns the command that writes the fixtures of the in-tree variant name.
func Regenerate(name string) string {
	return "/usr/bin/python3 variants/" + name + "/testdata/gen_fixtures.py"
}

// Load reads testdata/<name>.safetensors (relative to the test's package directory); regenerate
// is the command that writes it.
func Load(t testing.TB, regenerate, name string) *Fixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".safetensors"))
	if err != nil {
		t.Fatalf("read fixture (regenerate with %s): %v", regenerate, err)
	}
	ts, meta, err := tensorio.ReadSafetensors(data)
	if err != nil {
		t.Fatal(err)
	}
	return &Fixture{Name: name, Tensors: ts, Meta: meta, Regenerate: regenerate}
}

// Get returns the fixture's tensor name, failing the test when there is none.
func (f *Fixture) Get(t testing.TB, name string) *tensor.Tensor {
	t.Helper()
	x := tensorio.Lookup(f.Tensors, name)
	if x == nil {
		t.Fatalf("fixture %s has no tensor %q", f.Name, name)
	}
	return x
}

// Config resolves the fixture's --set values against v's schema and parses its seed.
func (f *Fixture) Config(t testing.TB, v variant.Variant) (variant.Config, uint64) {
	t.Helper()
	var sets map[string]any
	if err := json.Unmarshal([]byte(f.Meta["set"]), &sets); err != nil {
		t.Fatalf("fixture %s: bad set metadata: %v", f.Name, err)
	}
	var seed uint64
	if _, err := fmt.Sscan(f.Meta["seed"], &seed); err != nil {
		t.Fatalf("fixture %s: bad seed metadata: %v", f.Name, err)
	}
	cfg, err := variant.Resolve(v.Describe(), sets)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, seed
}

// WeightsSHA256 hashes g's state_dict exactly as `zoo export --weights` writes it: every
// initializer but constants, with metadata variant, config and seed.
func WeightsSHA256(t testing.TB, g *graph.Graph, variantName, config, seed string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := tensorio.WriteSafetensorsMap(&buf, g.StateDict(), map[string]string{"variant": variantName, "config": config, "seed": seed}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// WeightsSHA256 hashes g's weights as `zoo export variantName --weights` writes them with the
// fixture's recorded config and seed.
func (f *Fixture) WeightsSHA256(t testing.TB, g *graph.Graph, variantName string) string {
	t.Helper()
	return WeightsSHA256(t, g, variantName, f.Meta["config"], f.Meta["seed"])
}

// CheckWeights fails the test unless g's weights hash to the fixture's weights_sha256, i.e.
// unless they are the very weights PyTorch loaded.
func (f *Fixture) CheckWeights(t testing.TB, g *graph.Graph, variantName string) {
	t.Helper()
	if got, want := f.WeightsSHA256(t, g, variantName), f.Meta["weights_sha256"]; got != want {
		t.Fatalf("weights differ from the ones PyTorch loaded: sha256 %s, fixture %s (initialisation changed? regenerate with %s)", got, want, f.Regenerate)
	}
}

// Run compiles g on the cpu backend with the given thread count and runs the fixture's batch
// (tokens and key_padding_mask).
func Run(t testing.TB, g *graph.Graph, f *Fixture, threads int) (map[string]*tensor.Tensor, error) {
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
	return prog.Run(context.Background(), map[string]*tensor.Tensor{nn.InputTokens: f.Get(t, "tokens"), nn.InputKeyPadding: f.Get(t, "key_padding_mask")})
}

// CheckOutputs runs g on the fixture's batch at 1 to MaxThreads threads: hidden and logits must
// match PyTorch's within Atol on valid positions, and every thread count must match the
// single-threaded run within ThreadAtol.
func CheckOutputs(t testing.TB, g *graph.Graph, f *Fixture) {
	t.Helper()
	mask := f.Get(t, "key_padding_mask")
	var first map[string]*tensor.Tensor
	for threads := 1; threads <= MaxThreads; threads++ {
		outs, err := Run(t, g, f, threads)
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{nn.OutputHidden, nn.OutputLogits} {
			maxErr, at := CompareValid(t, outs[out], f.Get(t, out), mask)
			if maxErr > Atol {
				t.Errorf("threads %d: %s differs from PyTorch by %.3g at %v (atol %g)", threads, out, maxErr, at, Atol)
			}
			if threads == 1 {
				t.Logf("%s: max |zoo - pytorch| = %.3g on valid positions (smallest passing atol)", out, maxErr)
				continue
			}
			if d, at := CompareValid(t, outs[out], first[out], mask); d > ThreadAtol {
				t.Errorf("threads %d vs 1: %s differs by %.3g at %v", threads, out, d, at)
			}
		}
		if threads == 1 {
			first = outs
		}
	}
}

// CompareValid returns the largest absolute difference between got and want (B, N, D) over
// positions (b, i) whose mask entry is false (a real token), and its index; a NaN counts as +Inf.
func CompareValid(t testing.TB, got, want, mask *tensor.Tensor) (float64, []int) {
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
				if math.IsNaN(d) {
					return math.Inf(1), []int{b, i, j}
				}
				if d > worst {
					worst, at = d, []int{b, i, j}
				}
			}
		}
	}
	return worst, at
}

// Suite is a variant's parity test: its fixtures, each rebuilt from its metadata and compared
// with PyTorch by CheckOutputs.
type Suite struct {
	// Variant builds the models; its Describe().Name is the variant name the weights are
	// hashed with and the directory under variants/ the fixtures are regenerated from.
	Variant variant.Variant
	// Fixtures are the case names, files testdata/<name>.safetensors.
	Fixtures []string
	// GradRtol, where positive, replaces the package's GradRtol for this variant's gradients:
	// only for math that amplifies float32 rounding past it, with the reason at the use.
	GradRtol float64
}

// Name returns the variant's name.
func (s Suite) Name() string { return s.Variant.Describe().Name }

// Load reads the variant's fixture name.
func (s Suite) Load(t testing.TB, name string) *Fixture {
	t.Helper()
	return Load(t, Regenerate(s.Name()), name)
}

// WeightsSHA256 hashes g's weights as `zoo export --weights` writes them for this variant with
// the fixture's recorded config and seed.
func (s Suite) WeightsSHA256(t testing.TB, g *graph.Graph, f *Fixture) string {
	t.Helper()
	return f.WeightsSHA256(t, g, s.Name())
}

// Build rebuilds the model f was made from (same --set values and seed), checks that the
// config resolved from them is the one recorded (a default or a hyperparameter's meaning
// changed since the fixture was written: regenerate it), and checks that its weights are the
// ones PyTorch loaded.
func (s Suite) Build(t testing.TB, f *Fixture) *graph.Graph {
	t.Helper()
	cfg, seed := f.Config(t, s.Variant)
	if cfg.JSON() != f.Meta["config"] {
		t.Fatalf("resolved config %s, fixture %s (a default changed? regenerate with %s)", cfg.JSON(), f.Meta["config"], f.Regenerate)
	}
	g, err := s.Variant.Build(t.Context(), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	f.CheckWeights(t, g, s.Name())
	return g
}

// Run runs one subtest per fixture: load, Build, CheckOutputs.
func (s Suite) Run(t *testing.T) {
	t.Helper()
	if len(s.Fixtures) == 0 {
		t.Fatal("paritytest: no fixtures")
	}
	for _, name := range s.Fixtures {
		t.Run(name, func(t *testing.T) {
			f := s.Load(t, name)
			CheckOutputs(t, s.Build(t, f), f)
		})
	}
}
