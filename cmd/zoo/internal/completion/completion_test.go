package completion

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestCandidates(t *testing.T) {
	app := &Command{
		Flags: []Flag{{Names: []string{"registry"}, TakesValue: true}, {Names: []string{"json"}}},
		Subcommands: []*Command{
			{Names: []string{"run"}, ArgsUsage: "NAME[.PRESET]|FILE.onnx", Flags: []Flag{{Names: []string{"input", "i"}, TakesValue: true}, {Names: []string{"backend"}, TakesValue: true}}},
			{Names: []string{"bench"}, ArgsUsage: "NAME[.PRESET]..."},
			{Names: []string{"plugin"}, Subcommands: []*Command{{Names: []string{"new"}}, {Names: []string{"test"}, Flags: []Flag{{Names: []string{"json"}}}}}},
			{Names: []string{"help"}},
			{Names: []string{"completion"}},
			{Names: []string{"__serve-variant"}, Hidden: true},
		},
	}
	src := Source{
		Models: func() []string { return []string{"vanilla", "vanilla.tiny"} },
		FlagValues: func(c, f string) []string {
			return map[string][]string{"run --backend": {"auto", "cpu"}}[c+" "+f]
		},
		HelpTopics: []string{"environment"},
	}
	for _, c := range []struct {
		words []string
		want  string // the candidates written, space-separated
	}{
		{[]string{""}, "run bench plugin help completion"},
		{[]string{"-"}, "--help --version --registry --json"},
		{[]string{"--registry", "r.yaml", "r"}, "run"},
		{[]string{"run", "--"}, "--help --input --backend"},
		{[]string{"run", "v"}, "vanilla vanilla.tiny"},
		{[]string{"run", "vanilla", ""}, ""},
		{[]string{"bench", "vanilla", ""}, "vanilla vanilla.tiny"},
		{[]string{"run", "--backend", ""}, "auto cpu"},
		{[]string{"run", "-i", ""}, ""},
		{[]string{"plugin", ""}, "new test"},
		{[]string{"plugin", "test", "--j"}, "--json"},
		{[]string{"help", "e"}, "environment"},
		{[]string{"help", "plugin", ""}, "new test"},
		{[]string{"completion", ""}, "bash fish zsh"},
		{[]string{"nosuch", ""}, ""},
	} {
		var b bytes.Buffer
		Write(&b, app, c.words, src)
		if got := strings.Join(strings.Fields(b.String()), " "); got != c.want {
			t.Errorf("%q: %q, want %q", c.words, got, c.want)
		}
	}
}

func TestScripts(t *testing.T) {
	if !slices.Equal(Shells(), []string{"bash", "fish", "zsh"}) {
		t.Errorf("shells %v", Shells())
	}
	for sh, s := range Scripts {
		if !strings.Contains(s, "__complete") {
			t.Errorf("the %s script does not ask zoo __complete", sh)
		}
	}
	if f := FindFlag([]Flag{{Names: []string{"input", "i"}}}, "--i=x"); f == nil || f.Names[0] != "input" {
		t.Errorf("FindFlag(--i=x) = %v", f)
	}
}
