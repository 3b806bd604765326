package format

import (
	"bytes"
	"math"
	"strconv"
	"testing"
	"time"
)

func TestHuman(t *testing.T) {
	counts := []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1500, "1.50 k"}, {12e6, "12.00 M"}, {3.21e9, "3.21 G"}, {1e12, "1.00 T"}, {-5, "-5"}}
	for _, c := range counts {
		if got := HumanCount(c.n); got != c.want {
			t.Errorf("HumanCount(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	sizes := []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1536, "1.50 KiB"}, {2 << 20, "2.00 MiB"}, {13 << 28, "3.25 GiB"}}
	for _, c := range sizes {
		if got := HumanBytes(c.n); got != c.want {
			t.Errorf("HumanBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := MS(1500 * time.Microsecond); got != 1.5 {
		t.Errorf("MS(1.5ms) = %g", got)
	}
}

func TestAppendFloat32(t *testing.T) {
	for _, x := range []float32{0, 1, -0.1, 1e-45, math.MaxFloat32, 3.1415927} {
		s := string(AppendFloat32(nil, x))
		back, err := strconv.ParseFloat(s, 32)
		if err != nil || float32(back) != x {
			t.Errorf("AppendFloat32(%g) = %q, reads back as %g (%v)", x, s, back, err)
		}
	}
	for _, x := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if s := string(AppendFloat32([]byte("x"), x)); s != "xnull" {
			t.Errorf("AppendFloat32(%g) = %q, want null appended", x, s)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, map[string]int{"a": 1}); err != nil || b.String() != "{\n  \"a\": 1\n}\n" {
		t.Errorf("WriteJSON: %v, %q", err, b.String())
	}
	if err := WriteJSON(&b, func() {}); err == nil {
		t.Error("WriteJSON of a func: want an error")
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "window", "1 window"},
		{0, "window", "0 windows"},
		{6, "window", "6 windows"},
		{1, "batch", "1 batch"},
		{2, "batch", "2 batches"},
		{1, "warm-up run", "1 warm-up run"},
		{3, "warm-up run", "3 warm-up runs"},
		{2, "repetition", "2 repetitions"},
		{-1, "step", "-1 steps"},
		{2, "pass", "2 passes"},
		{2, "box", "2 boxes"},
		{2, "mesh", "2 meshes"},
		{2, "entry", "2 entries"},
		{2, "day", "2 days"},
		{1, "thread", "1 thread"},
	} {
		if got := Plural(c.n, c.noun); got != c.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
	if got := Plural(int64(1), "token"); got != "1 token" {
		t.Errorf("Plural(int64(1), token) = %q", got)
	}
	if got := Plural(uint64(592), "token"); got != "592 tokens" {
		t.Errorf("Plural(uint64(592), token) = %q", got)
	}
}

func TestWrap(t *testing.T) {
	for _, c := range []struct {
		s     string
		width int
		want  string
	}{
		{"a bb ccc", 4, "a bb\nccc"},
		{"a  bb   ccc", 80, "a bb ccc"},
		{"ééé éé", 5, "ééé\néé"}, // runes, not bytes
		{"longword a", 3, "longword\na"},
		{"", 10, ""},
	} {
		if got := Wrap(c.s, c.width); got != c.want {
			t.Errorf("Wrap(%q, %d) = %q, want %q", c.s, c.width, got, c.want)
		}
	}
}
