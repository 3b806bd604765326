package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/show"
)

// The default --seq is clamped to the model's max_len with a note; an explicit length
// beyond it stays an error.
func TestShowClampsDefaultSeq(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		ns     []int
		stderr string
	}{
		{"default within max_len", []string{"show", "vanilla.tiny", "--json"}, 0, []int{128, 512}, ""},
		{"default clamped", []string{"show", "linformer.tiny", "--json"}, 0, []int{128}, "clamped to linformer.tiny's maximum length 128"},
		{"default partly clamped", []string{"show", "linformer.tiny", "--set", "max_len=300", "--json"}, 0, []int{128, 300}, "showing n = 128,300"},
		{"explicit beyond max_len", []string{"show", "linformer.tiny", "--seq", "128,512"}, 2, nil, "--seq 512 is longer than linformer.tiny's maximum length 128"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := zoo(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, errs)
			}
			if c.stderr == "" && errs != "" || !strings.Contains(errs, c.stderr) || strings.Count(errs, "\n") > 1 {
				t.Errorf("stderr %q, want one line with %q (or nothing)", errs, c.stderr)
			}
			if code != 0 {
				return
			}
			var res show.Result
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			var ns []int
			for _, cost := range res.Costs {
				ns = append(ns, cost.N)
			}
			if len(ns) != len(c.ns) || ns[0] != c.ns[0] || ns[len(ns)-1] != c.ns[len(c.ns)-1] {
				t.Errorf("costs at n = %v, want %v", ns, c.ns)
			}
		})
	}
}
