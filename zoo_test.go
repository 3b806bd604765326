package zoo_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func load(t *testing.T, ref string, opts zoo.LoadOptions) *zoo.Model {
	t.Helper()
	m, err := zoo.Load(context.Background(), ref, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestLoadErrors: what a caller can fix is an *InputError naming the option at fault.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "registry.yaml")
	os.WriteFile(reg, []byte("variants:\n  - name: third\n    summary: a plugin\n    plugin: ./third\n    dev: true\n"), 0o644)
	for _, tc := range []struct {
		name, ref string
		opts      zoo.LoadOptions
		option    string
		want      string
	}{
		{"unknown variant", "vanila", zoo.LoadOptions{}, "", `did you mean "vanilla"`},
		{"unknown preset", "vanilla.huge", zoo.LoadOptions{}, "", "huge"},
		{"two presets", "vanilla.tiny", zoo.LoadOptions{Preset: "base"}, "LoadOptions.Preset", "LoadOptions.Preset says"},
		{"unknown key", "vanilla.tiny", zoo.LoadOptions{Set: map[string]string{"layerz": "1"}}, "LoadOptions.Set", "layerz"},
		{"bad value", "vanilla.tiny", zoo.LoadOptions{Set: map[string]string{"layers": "x"}}, "LoadOptions.Set", "layers"},
		{"preset on a file", "cmd/zoo/testdata/bert/bert-opset17.onnx", zoo.LoadOptions{Preset: "tiny"}, "LoadOptions.Preset", "does not apply"},
		{"seed on a file", "cmd/zoo/testdata/bert/bert-opset17.onnx", zoo.LoadOptions{Seed: 2}, "LoadOptions.Seed", "does not apply"},
		{"missing file", filepath.Join(dir, "no.onnx"), zoo.LoadOptions{}, "", "no such file"},
		{"weights missing", "vanilla.tiny", zoo.LoadOptions{Weights: filepath.Join(dir, "w.safetensors")}, "LoadOptions.Weights", "no such file"},
		{"weights of torch", "vanilla.tiny", zoo.LoadOptions{Weights: "w.pt"}, "LoadOptions.Weights", "convert a PyTorch state_dict"},
		{"bad tokenizer", "vanilla.tiny", zoo.LoadOptions{Tokenizer: reg}, "LoadOptions.Tokenizer", ""},
		{"precision", "vanilla.tiny", zoo.LoadOptions{Precision: "fp16"}, "LoadOptions.Precision", "want fp32 or bf16"},
		{"threads", "vanilla.tiny", zoo.LoadOptions{Threads: -1}, "LoadOptions.Threads", "must not be negative"},
		{"third-party without a host", "third", zoo.LoadOptions{Registries: []string{reg}}, "", "LoadOptions.Plugins"},
		{"missing registry", "vanilla", zoo.LoadOptions{Registries: []string{filepath.Join(dir, "none.yaml")}}, "LoadOptions.Registries", "read registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := zoo.Load(context.Background(), tc.ref, tc.opts)
			var ie *zoo.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v (%T), want an *InputError", err, err)
			}
			if ie.Option != tc.option || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q option %q, want option %q and %q", err, ie.Option, tc.option, tc.want)
			}
		})
	}
}

// TestEncoderErrors: options an encoder cannot honour, and texts it cannot take.
func TestEncoderErrors(t *testing.T) {
	m := load(t, "vanilla.tiny", zoo.LoadOptions{Set: map[string]string{"max_len": "32"}})
	for _, tc := range []struct {
		name   string
		opts   zoo.EncoderOptions
		option string
		want   string
	}{
		{"pool", zoo.EncoderOptions{Pool: "max"}, "EncoderOptions.Pool", `"max": want mean, cls or none`},
		{"normalize without pool", zoo.EncoderOptions{Normalize: true}, "EncoderOptions.Normalize", "applies to pooled embeddings"},
		{"window too long", zoo.EncoderOptions{Window: 33}, "EncoderOptions.Window", "maximum length 32"},
		{"negative window", zoo.EncoderOptions{Window: -1}, "EncoderOptions.Window", "must be positive"},
		{"negative batch", zoo.EncoderOptions{Batch: -1}, "EncoderOptions.Batch", "at least 1"},
		{"feed of no input", zoo.EncoderOptions{Feeds: []string{"nope=ids"}}, "EncoderOptions.Feeds", `has no input "nope"`},
		{"feed of no role", zoo.EncoderOptions{Feeds: []string{"tokens=words"}}, "EncoderOptions.Feeds", `unknown role "words"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.NewEncoder(tc.opts)
			var ie *zoo.InputError
			if !errors.As(err, &ie) || ie.Option != tc.option || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want an *InputError about %s saying %q", err, tc.option, tc.want)
			}
		})
	}
	enc, err := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 40)
	_, err = enc.Embed(context.Background(), "short", long)
	var tl *zoo.TooLongError
	if !errors.As(err, &tl) || tl.Index != 1 || tl.Window != 32 || !zoo.IsInput(err) {
		t.Errorf("a text over the window: %v, want a TooLongError for text 1, window 32", err)
	}
	if _, err := enc.Embed(context.Background(), ""); !zoo.IsInput(err) {
		t.Errorf("an empty text: %v, want an *InputError", err)
	}
	none, _ := m.NewEncoder(zoo.EncoderOptions{})
	if _, err := none.Embed(context.Background(), "x"); !zoo.IsInput(err) {
		t.Errorf("Embed without pooling: %v, want an *InputError", err)
	}
	trunc, _ := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean, Truncate: true})
	vecs, err := trunc.Embed(context.Background(), long)
	if err != nil || len(vecs) != 1 {
		t.Fatalf("Truncate: %v, %d vectors", err, len(vecs))
	}
	first, _ := trunc.Embed(context.Background(), long[:32])
	if !equalBits(vecs[0], first[0]) {
		t.Errorf("a truncated text's embedding differs from its first window's")
	}
}

// TestEncoderPaths: Embed in batches, Embed one at a time, Encode and Stream agree; a batch
// padded to a longer text changes nothing of a shorter one beyond rounding.
func TestEncoderPaths(t *testing.T) {
	ctx := context.Background()
	m := load(t, "vanilla.tiny", zoo.LoadOptions{})
	texts := []string{"a", "The cat sat on the mat.", "Colourless green ideas sleep furiously, said the linguist."}
	batched, _ := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean, Batch: 3})
	single, _ := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolMean, Batch: 1})
	all, err := batched.Embed(ctx, texts...)
	if err != nil {
		t.Fatal(err)
	}
	one, err := single.Embed(ctx, texts...)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := single.Encode(ctx, texts...)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		if d := maxDiff(all[i], one[i]); d > 1e-5 {
			t.Errorf("text %d: batched and single embeddings differ by %g", i, d)
		}
		if len(enc[i].IDs) != len(text) || enc[i].Outputs["hidden"].Shape[0] != len(text) {
			t.Errorf("text %d: Encode gives %d ids, hidden %v; want %d", i, len(enc[i].IDs), enc[i].Outputs["hidden"].Shape, len(text))
		}
		if !equalBits(enc[i].Outputs["embedding"].F32, one[i]) {
			t.Errorf("text %d: Encode's embedding differs from Embed's", i)
		}
		var streamed []float32
		err := single.Stream(ctx, strings.NewReader(text), func(b zoo.Batch) error {
			streamed = append(streamed, b.Outputs["embedding"].F32...)
			return nil
		})
		if err != nil || !equalBits(streamed, one[i]) {
			t.Errorf("text %d: Stream %v, its embedding differs from Embed's", i, err)
		}
	}
	stop := errors.New("enough")
	windows := 0
	small, _ := m.NewEncoder(zoo.EncoderOptions{Window: 8, Batch: 2})
	err = small.Stream(ctx, strings.NewReader(strings.Repeat("abcdefgh", 10)), func(b zoo.Batch) error {
		windows += b.Windows.B
		if windows >= 4 {
			return stop
		}
		return nil
	})
	if err != stop || windows != 4 {
		t.Errorf("Stream stopped by its callback: %v after %d windows", err, windows)
	}
}

// TestModelRun: arrays by input name; a missing or unknown input is an *InputError; a closed
// model refuses to run.
func TestModelRun(t *testing.T) {
	ctx := context.Background()
	m := load(t, "vanilla.tiny", zoo.LoadOptions{})
	tok, _ := tensor.New(tensor.Int64, 1, 4)
	mask, _ := tensor.New(tensor.Bool, 1, 4)
	for i := range tok.I64 {
		tok.I64[i] = int64(i + 1)
	}
	outs, err := m.Run(ctx, map[string]*tensor.Tensor{"tokens": tok, "key_padding_mask": mask})
	if err != nil || len(outs["hidden"].Shape) != 3 || outs["hidden"].Shape[1] != 4 {
		t.Fatalf("Run: %v, %v", err, outs)
	}
	if _, err := m.Run(ctx, map[string]*tensor.Tensor{"tokens": tok}); !zoo.IsInput(err) || !strings.Contains(err.Error(), "key_padding_mask") {
		t.Errorf("a missing input: %v", err)
	}
	if _, err := m.Run(ctx, map[string]*tensor.Tensor{"tokens": tok, "key_padding_mask": mask, "extra": tok}); !zoo.IsInput(err) {
		t.Errorf("an unknown input: %v", err)
	}
	m.Close()
	if _, err := m.Run(ctx, map[string]*tensor.Tensor{"tokens": tok, "key_padding_mask": mask}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Run after Close: %v", err)
	}
}

// TestEncoderConcurrent: encoders of one model are safe for concurrent use (run with -race).
func TestEncoderConcurrent(t *testing.T) {
	ctx := context.Background()
	m := load(t, "vanilla.tiny", zoo.LoadOptions{})
	enc, _ := m.NewEncoder(zoo.EncoderOptions{Pool: zoo.PoolCLS})
	want, err := enc.Embed(ctx, "shared text")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := enc.Embed(ctx, "shared text")
			if err != nil || !equalBits(got[0], want[0]) {
				t.Errorf("concurrent Embed: %v", err)
			}
		}()
	}
	wg.Wait()
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}
