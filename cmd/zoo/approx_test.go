package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/approx"
)

// approxWeights writes vanilla.tiny's weights (seed 3) once for the tests of this file.
func approxWeights(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vanilla.safetensors")
	if code, _, errs := zoo(t, "export", "vanilla.tiny", "--seed", "3", "--weights", path); code != 0 {
		t.Fatalf("export --weights: exit %d: %s", code, errs)
	}
	return path
}

func approxJSON(t *testing.T, args ...string) approx.Doc {
	t.Helper()
	code, out, errs := zoo(t, append(append([]string{"approx"}, args...), "--json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var doc approx.Doc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, p := range doc.Points {
		if len(p.Layers) != 2 || len(p.Layers[0]) != 4 {
			t.Fatalf("point %d: %d layers of %d heads, want 2 × 4", p.Value, len(p.Layers), len(p.Layers[0]))
		}
	}
	return doc
}

// TestApprox checks the sweep on 128 tokens of the sample text: vanilla against exact
// attention on its own Q, K, V is 0 up to float32 rounding (which also proves Q, K and V are
// read right: the backend's output is compared), Linformer's error falls as k grows and
// Performer's as the features grow (fixed seed, the mean over 2 layers × 4 heads, each step
// 4×), Nyström with a landmark per token and the sparse window covering every block are
// exact, and -o writes a PNG.
func TestApprox(t *testing.T) {
	w := approxWeights(t)
	common := []string{"--weights", w, "--input", text, "--tokens", "128", "--seed", "5"}
	if d := approxJSON(t, append([]string{"vanilla.tiny"}, common...)...); len(d.Points) != 1 || d.Points[0].Max > 1e-5 {
		t.Errorf("vanilla against itself: %+v, want one point below 1e-5", d.Points)
	}
	for _, tc := range []struct{ model, values string }{{"linformer.tiny", "4,16,64"}, {"performer.tiny", "8,32,128,512"}} {
		d := approxJSON(t, append([]string{tc.model, "--values", tc.values}, common...)...)
		for i := 1; i < len(d.Points); i++ {
			if !(d.Points[i].Mean < d.Points[i-1].Mean) {
				t.Errorf("%s: error %.4g at %s=%d, not below %.4g at %d", tc.model, d.Points[i].Mean, d.Knob, d.Points[i].Value, d.Points[i-1].Mean, d.Points[i-1].Value)
			}
		}
		if first, last := d.Points[0].Mean, d.Points[len(d.Points)-1].Mean; !(first > 2*last) {
			t.Errorf("%s: error %.4g → %.4g over the sweep, want at least halved", tc.model, first, last)
		}
	}
	if d := approxJSON(t, append([]string{"nystrom.tiny", "--values", "128"}, common...)...); d.Points[0].Max > 1e-6 {
		t.Errorf("nystrom with 128 landmarks on 128 tokens: error %g", d.Points[0].Max)
	}
	d := approxJSON(t, append([]string{"sparse.tiny"}, common...)...)
	first, last := d.Points[0], d.Points[len(d.Points)-1]
	if last.Coverage != 1 || last.Max > 1e-12 || first.Mean <= 0 || first.Coverage >= 1 {
		t.Errorf("sparse: first point %+v, last %+v; want the sweep to end at full coverage with error 0", first, last)
	}
	pngPath := filepath.Join(t.TempDir(), "approx.png")
	if code, out, errs := zoo(t, append([]string{"approx", "linformer.tiny", "--values", "4,16", "-o", pngPath}, common...)...); code != 0 || !strings.Contains(out, "layer 1") {
		t.Fatalf("-o: exit %d: %s\n%s", code, errs, out)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("plot: %v", err)
	}
}

// TestApproxBadInput: one line, exit 2.
func TestApproxBadInput(t *testing.T) {
	w := approxWeights(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rope.tiny", "--weights", w}, "no approximation of rope"},
		{[]string{"linear.tiny", "--weights", w, "--values", "4"}, "no approximation knob"},
		{[]string{"linformer.tiny"}, "weights"},
		{[]string{"linformer.tiny", "--weights", w, "--values", "0"}, "--values"},
		{[]string{"linformer.tiny", "--weights", w, "-o", "x.svg"}, ".png"},
	} {
		code, _, errs := zoo(t, append(append([]string{"approx"}, tc.args...), "--input", text)...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
}
