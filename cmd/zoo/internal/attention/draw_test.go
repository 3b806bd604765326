package attention

import (
	"bytes"
	"image/png"
	"testing"

	"github.com/zoo-dev/zoo/zoo/attnmap"
)

func TestTile(t *testing.T) {
	for _, c := range []struct{ q, k, w, h int }{
		{1, 1, 240, 240},       // the smallest tile
		{20, 10, 240, 370},     // 14 per token plus 90
		{100, 100, 1000, 1000}, // the largest
	} {
		if w, h := Tile(c.q, c.k); w != c.w || h != c.h {
			t.Errorf("Tile(%d, %d) = %d×%d, want %d×%d", c.q, c.k, w, h, c.w, c.h)
		}
	}
}

func TestDraw(t *testing.T) {
	m := attnmap.Map{Model: "m", Tokens: []string{"a", "b"}, Keys: []string{"a", "b"}, Layers: []attnmap.Layer{
		{Layer: 0, Heads: []attnmap.Head{{Head: 0, Weights: [][]float32{{1, 0}, {0.5, 0.5}}}, {Head: 1, Weights: [][]float32{{0, 1}, {0, 1}}}}},
	}}
	var b bytes.Buffer
	if err := Draw(&b, m, "title"); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	w, h := ImageSize(m)
	if got := img.Bounds(); got.Dx() != w || got.Dy() != h || w != 2*240 || h != 240+TitleBand {
		t.Errorf("image %d×%d, ImageSize %d×%d: want two tiles of 240×240 and the title band", got.Dx(), got.Dy(), w, h)
	}
}

// TestColorBar: each map has its colour bar at its right, running from white to the
// palette's darkest colour (the map's largest weight, here in the map's left column): the
// strip at the tile's right holds that colour.
func TestColorBar(t *testing.T) {
	w := [][]float32{{1, 0.1, 0.1}, {0.2, 0.2, 0.2}, {0.3, 0.3, 0.3}}
	m := attnmap.Map{Tokens: []string{"a", "b", "c"}, Keys: []string{"a", "b", "c"}, Layers: []attnmap.Layer{{Heads: []attnmap.Head{{Weights: w}}}}}
	var buf bytes.Buffer
	if err := Draw(&buf, m, "t"); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	dark := weightPalette(64).Colors()[63]
	dr, dg, db, _ := dark.RGBA()
	b := img.Bounds()
	count := func(x0, x1 int) int {
		n := 0
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := x0; x < x1; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				if r == dr && g == dg && bl == db {
					n++
				}
			}
		}
		return n
	}
	if bar := count(b.Max.X-ColorBarWidth, b.Max.X); bar < 20 {
		t.Errorf("%d pixels of the darkest colour in the strip right of the map; want its colour bar", bar)
	}
}
