package variant

import (
	"strings"
	"testing"
)

func TestResolveErrors(t *testing.T) {
	d := Description{Name: "v", Params: []Param{
		{Name: "n", Kind: KindInt, Default: int64(1), Min: MinOf(1)},
		{Name: "scale", Kind: KindFloat, Default: 0.0, Min: MinOf(0)},
		{Name: "b", Kind: KindBool, Default: true},
		{Name: "s", Kind: KindString, Default: "a", Choices: []string{"a", "b"}},
	}}
	for _, tc := range []struct {
		set  map[string]any
		want string
	}{
		{map[string]any{"scale": "false"}, "v: scale=false: want a number, not true or false"},
		{map[string]any{"scale": false}, "v: scale=false: want a number, not true or false"},
		{map[string]any{"scale": "x"}, "v: scale=x: want a number"},
		{map[string]any{"scale": -1}, "v: scale=-1: must be at least 0"},
		{map[string]any{"scale": "NaN"}, "v: scale=NaN: want a finite number"},
		{map[string]any{"n": "1.5"}, "v: n=1.5: want an integer"},
		{map[string]any{"n": 0}, "v: n=0: must be at least 1"},
		{map[string]any{"b": "maybe"}, "v: b=maybe: want true or false"},
		{map[string]any{"s": "c"}, "v: s=c: want one of a, b"},
		{map[string]any{"scal": 1}, `v has no hyperparameter "scal" (did you mean "scale"?)`},
	} {
		_, err := Resolve(d, tc.set)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Resolve(%v) = %v, want %q", tc.set, err, tc.want)
		}
	}
	cfg, err := Resolve(d, map[string]any{"scale": "1"}, map[string]any{"n": int64(3), "b": "false", "s": "b"})
	if err != nil || cfg.Float("scale") != 1 || cfg.Int("n") != 3 || cfg.Bool("b") || cfg.String("s") != "b" {
		t.Fatalf("Resolve = %v, %v", cfg, err)
	}
}
