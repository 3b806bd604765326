package servecli

import (
	"fmt"
	"testing"
)

func TestPerModel(t *testing.T) {
	served := []string{"a", "b"}
	for _, c := range []struct {
		flags []string
		want  string // fmt of the map, or the error's start
	}{
		{nil, "map[]"},
		{[]string{"x.json"}, "map[a:x.json b:x.json]"},
		{[]string{"b=y.json"}, "map[b:y.json]"},
		{[]string{"b=y.json", "x.json"}, "map[a:x.json b:y.json]"},
		{[]string{"x.json", "a=y.json", "a=z.json"}, "map[a:z.json b:x.json]"},
		{[]string{"c=y.json"}, `--tokenizer c=y.json: no model is served as "c" (served: a, b)`},
		{[]string{"a="}, "--tokenizer a=: no file after ="},
	} {
		got, err := perModel("tokenizer", c.flags, served)
		s := fmt.Sprint(got)
		if err != nil {
			s = err.Error()
		}
		if s != c.want {
			t.Errorf("perModel(%q) = %s, want %s", c.flags, s, c.want)
		}
	}
}
