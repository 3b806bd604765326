package benchplot

import (
	"bytes"
	"image/png"
	"math"
	"testing"
)

// TestRenderPanels draws line, dashed, marked and scatter curves on linear and log axes,
// with points a log axis cannot show, and checks that the result is a PNG of the size asked
// for; no panels and a non-positive size are errors.
func TestRenderPanels(t *testing.T) {
	curves := []Curve{
		{Label: "a", X: []float64{1, 2, 3}, Y: []float64{3, 2, 1}},
		{Label: "b", X: []float64{1, 2, 3}, Y: []float64{2, math.NaN(), 1.5}, Dashed: true, Marks: true, Color: 1},
		{X: []float64{100, 1000}, Y: []float64{0.5, 0.4}, Scatter: true, PointLabels: []string{"p", "q"}, Color: 2},
	}
	tests := []struct {
		name    string
		panels  []Panel
		w, h    int
		wantErr bool
	}{
		{"linear and log", []Panel{{Title: "lin", Curves: curves}, {Title: "log", LogX: true, LogY: true, Curves: curves}}, 900, 400, false},
		{"nothing drawable on log axes", []Panel{{Title: "empty", LogX: true, Curves: []Curve{{X: []float64{-1, 0}, Y: []float64{1, 2}}}}}, 300, 200, false},
		{"one point", []Panel{{Curves: []Curve{{X: []float64{5}, Y: []float64{5}, Scatter: true}}}}, 300, 200, false},
		{"no panels", nil, 300, 200, true},
		{"zero size", []Panel{{Curves: curves}}, 0, 200, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := RenderPanels(&buf, tc.panels, tc.w, tc.h)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := png.DecodeConfig(&buf)
			if err != nil || cfg.Width != tc.w || cfg.Height != tc.h {
				t.Fatalf("PNG %dx%d (%v), want %dx%d", cfg.Width, cfg.Height, err, tc.w, tc.h)
			}
		})
	}
}

// TestLinearTicksDistinct: on every range, narrow ones included (6.80 to 6.95, where
// gonum's default labels read 6.9, 6.9, 6.8), the labelled ticks read differently and
// in order, four to ten of them.
func TestLinearTicksDistinct(t *testing.T) {
	for _, r := range [][2]float64{{6.8, 6.95}, {0, 1}, {-0.003, 0.004}, {1, 300}, {5.5, 5.51}, {2.9, 8.3}, {0.02, 0.0201}, {1e5, 3.2e5}} {
		seen := map[string]bool{}
		labelled := 0
		prev := math.Inf(-1)
		for _, tk := range (LinearTicks{}).Ticks(r[0], r[1]) {
			if tk.Label == "" {
				continue
			}
			if seen[tk.Label] {
				t.Errorf("range %v: label %q twice", r, tk.Label)
			}
			seen[tk.Label] = true
			if tk.Value <= prev || tk.Value < r[0] || tk.Value > r[1]*(1+1e-9)+1e-12 {
				t.Errorf("range %v: tick %v out of order or range", r, tk.Value)
			}
			prev = tk.Value
			labelled++
		}
		if labelled < 3 || labelled > 10 {
			t.Errorf("range %v: %d labelled ticks", r, labelled)
		}
	}
}

// TestSeparateLabels: labels at nearly the same place (the ends of curves that converge,
// two scatter points side by side) are moved apart until no two boxes overlap. The second
// case is a compare report's training-loss panel, whose labels once ended three on one spot:
// a label moved to just above another differed from it by a hair less than labelH in
// floating point and kept being moved back onto it.
func TestSeparateLabels(t *testing.T) {
	for _, c := range []struct {
		name   string
		ts     []placedLabel
		ax, ay axisMap
		w, h   float64
		still  int // the index of a label with room, which must stay; -1 for none
	}{
		{"converging", []placedLabel{{text: "linformer", x: 10, y: 5.00}, {text: "linear", x: 10.2, y: 5.01}, {text: "vanilla", x: 10.1, y: 4.99}, {text: "far", x: 1, y: 5}},
			axisMap{0, 12, false}, axisMap{4, 6, false}, 500, 400, 3},
		{"compare report", []placedLabel{{text: "vanilla", x: 40, y: 3.5583667755126953}, {text: "linear", x: 40, y: 3.5598251819610596},
			{text: "performer", x: 40, y: 3.5541205406188965}, {text: "linformer", x: 40, y: 3.5557949542999268}},
			axisMap{-1.2, 47.2, false}, axisMap{3.199405565261841, 5.958380088806153, false}, 590, 450, -1},
	} {
		ts, ax, ay, w, h := c.ts, c.ax, c.ay, c.w, c.h
		var keep float64
		if c.still >= 0 {
			keep = ts[c.still].y
		}
		separate(ts, ax, ay, w, h)
		for i := range ts {
			for j := i + 1; j < len(ts); j++ {
				a, b := ts[i], ts[j]
				ax0, bx0 := ax.frac(a.x)*w+6, ax.frac(b.x)*w+6
				overlapX := ax0 < bx0+float64(len(b.text))*labelCharW && bx0 < ax0+float64(len(a.text))*labelCharW
				if overlapX && math.Abs(ay.frac(a.y)*h-ay.frac(b.y)*h) < labelH-1e-3 {
					t.Errorf("%s: %s and %s overlap: y %v and %v", c.name, a.text, b.text, a.y, b.y)
				}
			}
		}
		if c.still >= 0 && ts[c.still].y != keep {
			t.Errorf("%s: a label with room was moved to %v", c.name, ts[c.still].y)
		}
	}
}

// TestErrorBarsOnLogAxes draws error bars larger than their points on log axes (a timing
// whose spread exceeds its mean): they stop short of zero instead of failing the drawing.
func TestErrorBarsOnLogAxes(t *testing.T) {
	var buf bytes.Buffer
	p := Panel{LogX: true, LogY: true, Curves: []Curve{{X: []float64{7, 17}, Y: []float64{3, 4}, XErr: []float64{10, 1}, YErr: []float64{5, 0.1},
		Scatter: true, PointLabels: []string{"a", "b"}}}}
	if err := RenderPanels(&buf, []Panel{p}, 600, 400); err != nil {
		t.Fatal(err)
	}
	s := []Series{{Label: "v", N: []float64{128, 512}, TimeMS: []float64{7.23, 17.36}, TimeSD: []float64{11.2, 10.15}, MemBytes: []float64{1 << 20, 2 << 20}}}
	if err := Render(&buf, s, Options{}); err != nil {
		t.Fatal(err)
	}
}
