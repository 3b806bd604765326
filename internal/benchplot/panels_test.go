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
