package vanilla_test

import (
	"context"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/autodiff"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// zoo trains what PyTorch exports: the seed's encoder as torch.onnx.export wrote it (opset 17,
// zoo's weights of seed_tiny_outputs), imported and differentiated, gives the same loss and
// the same gradients for the parameters both graphs name alike (embedding, biases, norms) as
// zoo's own graph of those weights, at paritytest's rule. PyTorch's export does not mark the
// positional table as a buffer, so it is left out of wrt by name; and it keeps one copy of
// initializers with equal values (every LayerNorm's ones and zeros at initialisation), whose
// gradient is then the sum over the parameters it stands for.
func TestGradientsOfPyTorchExport(t *testing.T) {
	data, err := os.ReadFile("testdata/seed_tiny_op17.onnx")
	if err != nil {
		t.Fatal(err)
	}
	imported, err := onnx.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	f := loadFixture(t, "seed_tiny_outputs")
	cfg, seed := f.Config(t, vanilla.New())
	own, err := vanilla.New().Build(context.Background(), cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	tokens := f.get(t, "tokens")
	targets := tokens.Clone()
	for i := range targets.I64 {
		if i%5 == 0 {
			targets.I64[i] = 0 // ignored
		}
	}
	feeds := map[string]*tensor.Tensor{"tokens": tokens, "key_padding_mask": f.get(t, "key_padding_mask"), autodiff.InputTargets: targets}
	run := func(g *graph.Graph) (map[string]*tensor.Tensor, map[string]string) {
		t.Helper()
		lg, err := autodiff.WithCrossEntropy(g, autodiff.LossOptions{LabelSmoothing: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		wrt := slices.DeleteFunc(autodiff.Params(g), func(p string) bool { return p == "pos_encoding.pe" })
		train, grads, err := autodiff.Gradients(context.Background(), lg, autodiff.OutputLoss, wrt)
		if err != nil {
			t.Fatal(err)
		}
		cpu, _ := backends.Lookup("cpu")
		prog, err := cpu.Compile(train, backends.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer prog.Close()
		out, err := prog.Run(context.Background(), feeds)
		if err != nil {
			t.Fatal(err)
		}
		return out, grads
	}
	got, gotNames := run(imported)
	want, wantNames := run(own)
	if l, w := got[autodiff.OutputLoss].F32[0], want[autodiff.OutputLoss].F32[0]; math.Abs(float64(l-w)) > 1e-5*math.Abs(float64(w)) {
		t.Errorf("loss of the PyTorch export %v, of zoo's graph %v", l, w)
	}
	shared := 0
	for p, name := range gotNames {
		wn, ok := wantNames[p]
		if !ok {
			continue
		}
		shared++
		a, b := got[name], want[wn].Clone()
		// The export's single copy stands for every zoo parameter it lacks with equal values.
		for q, qn := range wantNames {
			if _, inExport := gotNames[q]; !inExport && q != p && tensor.Equal(own.Initializer(q), own.Initializer(p)) {
				for k, v := range want[qn].F32 {
					b.F32[k] += v
				}
			}
		}
		diff, scale := 0.0, 0.0
		for k := range b.F32 {
			scale = math.Max(scale, math.Abs(float64(b.F32[k])))
			diff = math.Max(diff, math.Abs(float64(a.F32[k]-b.F32[k])))
		}
		if !(diff <= 1e-5*scale+1e-8) {
			t.Errorf("gradient of %s: the PyTorch export's differs from zoo's graph's by %.3g (largest element %.3g)", p, diff, scale)
		}
	}
	if shared < 10 {
		t.Errorf("only %d parameters are named alike in both graphs", shared)
	}
	t.Logf("%d parameters compared; the export has %d, zoo's graph %d", shared, len(gotNames), len(wantNames))
}
