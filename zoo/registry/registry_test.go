package registry

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/hostile"
	"github.com/zoo-dev/zoo/zoo/variant"
)

func TestParseExample(t *testing.T) {
	path := filepath.Join("testdata", "example.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); !reflect.DeepEqual(got, []string{"vanilla", "my-performer"}) {
		t.Fatalf("names %v", got)
	}
	es := r.Entries()
	v := es[0]
	want := Entry{
		Name: "vanilla", Aliases: []string{"mha"}, Plugin: Builtin,
		Args:     nil,
		Defaults: map[string]any{"d_model": int64(512)},
		Presets: map[string]map[string]any{
			"tiny": {"d_model": int64(64), "heads": int64(4), "layers": int64(2), "d_ff": int64(128)},
			"base": {},
		},
		Source: path + ":11",
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("vanilla:\n got %#v\nwant %#v", v, want)
	}
	p := es[1]
	if p.Plugin != filepath.Join("testdata", "plugins", "zoo-variant-performer") || p.IsBuiltin() {
		t.Errorf("plugin path %q", p.Plugin)
	}
	if p.Summary != "Performer (FAVOR+) linear attention" || p.Paper != "https://arxiv.org/abs/2009.14794" {
		t.Errorf("performer summary %q, paper %q", p.Summary, p.Paper)
	}
	if p.SHA256 != "9f2c4b7d1e0a3c5f6b8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d" || p.Dev || p.Env["PERFORMER_FEATURES"] != "256" {
		t.Errorf("performer: %+v", p)
	}
	if p.Defaults["kernel"] != "relu" || p.Defaults["features"] != int64(256) {
		t.Errorf("defaults %v", p.Defaults)
	}
	if got := p.PresetNames(); !reflect.DeepEqual(got, []string{"tiny"}) {
		t.Errorf("presets %v", got)
	}
}

// The repository's own registry.yaml must parse (the CLI embeds it).
func TestParseRepoRegistry(t *testing.T) {
	path := filepath.Join("..", "..", "registry.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skip(err)
	}
	if _, err := Parse("registry.yaml", data); err != nil {
		t.Fatal(err)
	}
}

func TestScalarTypesFeedResolve(t *testing.T) {
	r, err := Parse("r.yaml", []byte(`
variants:
  - name: v
    plugin: builtin
    defaults: {n: 3, x: 0.5, e: 1e-5, b: true, s: post, q: "12", h: 0x10, big: 9007199254740993}
`))
	if err != nil {
		t.Fatal(err)
	}
	e, _, _ := r.Lookup("v")
	want := map[string]any{"n": int64(3), "x": 0.5, "e": 1e-5, "b": true, "s": "post", "q": "12", "h": int64(16), "big": int64(9007199254740993)}
	if !reflect.DeepEqual(e.Defaults, want) {
		t.Fatalf("defaults %#v", e.Defaults)
	}
	desc := variant.Description{Name: "v", Params: []variant.Param{
		{Name: "n", Kind: variant.KindInt, Default: int64(0)},
		{Name: "x", Kind: variant.KindFloat, Default: 0.0},
		{Name: "e", Kind: variant.KindFloat, Default: 0.0},
		{Name: "b", Kind: variant.KindBool, Default: false},
		{Name: "s", Kind: variant.KindString, Default: ""},
		{Name: "q", Kind: variant.KindInt, Default: int64(0)},
		{Name: "h", Kind: variant.KindInt, Default: int64(0)},
		{Name: "big", Kind: variant.KindInt, Default: int64(0)},
	}}
	cfg, err := variant.Resolve(desc, e.Defaults)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Int("n") != 3 || cfg.Float("e") != 1e-5 || !cfg.Bool("b") || cfg.Int("q") != 12 || cfg.Int("big") != 9007199254740993 {
		t.Fatalf("resolved %v", cfg)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "variants:\n", "variants: []\n", "apiVersion: zoo/v1\n", "---\n"} {
		r, err := Parse("r.yaml", []byte(src))
		if err != nil || len(r.Names()) != 0 {
			t.Errorf("Parse(%q) = %v, %v", src, r.Names(), err)
		}
	}
}

// head is an entry for an executable plugin that later lines extend.
const head = "variants:\n  - name: vanilla\n    summary: s\n    plugin: ./vanilla\n"

// builtin is an entry for a built-in variant that later lines extend.
const builtin = "variants:\n  - name: vanilla\n    plugin: builtin\n"

func TestParseErrors(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	tests := []struct {
		name, src, want string
	}{
		{"yaml syntax", "variants:\n  - name: a\n    summary: b\n     plugin: c\n", "registry.yaml:4: mapping values are not allowed in this context"},
		{"yaml unclosed", "variants: [\n", "registry.yaml:1: did not find expected node content"},
		{"tab indent", "variants:\n\t- name: a\n", "registry.yaml:2: found character that cannot start any token"},
		{"two documents", head + "---\nvariants: []\n", "registry.yaml:5: a second YAML document; a registry is a single document (remove the \"---\")"},
		{"top not mapping", "- name: a\n", `registry.yaml:1: want a mapping with a "variants" list at the top, got a list`},
		{"unknown top key", "variant:\n  - name: a\n", `registry.yaml:1: unknown key "variant" (did you mean "variants"?)`},
		{"bad apiVersion", "apiVersion: zoo/v2\n", `registry.yaml:1: apiVersion "zoo/v2" is not supported (want zoo/v1)`},
		{"variants not list", "variants: {a: 1}\n", "registry.yaml:1: variants must be a list of entries, not a mapping"},
		{"entry not mapping", "variants:\n  - vanilla\n", `registry.yaml:2: variant #1: want a mapping with name and plugin (and a summary for an executable plugin), got "vanilla"`},
		{"unknown key", head + "    prests: {}\n", `registry.yaml:5: variant "vanilla": unknown key "prests" (did you mean "presets"?)`},
		{"unknown key no hint", head + "    colour: red\n", `registry.yaml:5: variant "vanilla": unknown key "colour" (known keys: name, aliases, summary, paper, plugin, sha256, dev, args, env, defaults, presets)`},
		{"duplicate key", head + "    summary: again\n", `registry.yaml:5: variant "vanilla": key "summary" is repeated (first at line 3)`},
		{"missing name", "variants:\n  - summary: s\n    plugin: builtin\n", `registry.yaml:2: variant #1: missing required key "name"`},
		{"missing summary", "variants:\n  - name: a\n    plugin: ./a\n", `registry.yaml:2: variant "a": missing required key "summary" (one line for zoo list; required for an executable plugin)`},
		{"summary on builtin", builtin + "    summary: s\n", `registry.yaml:4: variant "vanilla": summary comes from the built-in variant itself (zoo show vanilla); remove it for plugin: builtin`},
		{"paper on builtin", "variants:\n  - name: rope\n    paper: https://arxiv.org/abs/2104.09864\n    plugin: builtin\n", `registry.yaml:3: variant "rope": paper comes from the built-in variant itself (zoo show rope); remove it for plugin: builtin`},
		{"missing plugin", "variants:\n  - name: a\n    summary: s\n", `registry.yaml:2: variant "a": missing required key "plugin"`},
		{"name not string", "variants:\n  - name: 42\n", `registry.yaml:2: variant #1: name must be a string, not the integer 42 (quote it: "42")`},
		{"name list", "variants:\n  - name: [a]\n", `registry.yaml:2: variant #1: name must be a string, not a list`},
		{"invalid name", "variants:\n  - name: Vanilla\n", `registry.yaml:2: variant #1: invalid name "Vanilla" (use lower-case letters, digits, '-' and '_', starting with a letter or digit)`},
		{"name with dot", "variants:\n  - name: a.b\n", `registry.yaml:2: variant #1: invalid name "a.b" (use lower-case letters, digits, '-' and '_', starting with a letter or digit)`},
		{"summary number", "variants:\n  - name: a\n    summary: 1.5\n    plugin: ./a\n", `registry.yaml:3: variant "a": summary must be a string, not the number 1.5 (quote it: "1.5")`},
		{"paper null", head + "    paper:\n", `registry.yaml:5: variant "vanilla": paper must be a string, not null`},
		{"empty plugin", "variants:\n  - name: a\n    summary: s\n    plugin: \"\"\n", `registry.yaml:4: variant "a": plugin is empty (want builtin or the path of an executable)`},
		{"short sha", "variants:\n  - name: a\n    summary: s\n    plugin: ./a\n    sha256: abc\n", `registry.yaml:5: variant "a": sha256 must be 64 hex digits, got "abc" (3 characters)`},
		{"non-hex sha", "variants:\n  - name: a\n    summary: s\n    plugin: ./a\n    sha256: " + strings.Repeat("g", 64) + "\n", `registry.yaml:5: variant "a": sha256 must be 64 hex digits, got "` + strings.Repeat("g", 64) + `" (64 characters)`},
		{"sha on builtin", builtin + "    sha256: " + hex64 + "\n", `registry.yaml:4: variant "vanilla": sha256 pins an executable plugin; remove it for plugin: builtin`},
		{"dev not bool", head + "    dev: yes\n", `registry.yaml:5: variant "vanilla": dev must be true or false, not "yes"`},
		{"aliases scalar", head + "    aliases: mha\n", `registry.yaml:5: variant "vanilla": aliases must be a list of strings, not "mha"`},
		{"alias number", head + "    aliases: [1]\n", `registry.yaml:5: variant "vanilla": aliases entry must be a string, not the integer 1 (quote it: "1")`},
		{"invalid alias", head + "    aliases: [\"MHA\"]\n", `registry.yaml:5: variant "vanilla": invalid alias "MHA" (use lower-case letters, digits, '-' and '_', starting with a letter or digit)`},
		{"alias twice", head + "    aliases: [mha, mha]\n", `registry.yaml:5: variant "vanilla": alias "mha" is listed twice`},
		{"alias own name", head + "    aliases: [vanilla]\n", `registry.yaml:5: variant "vanilla": alias "vanilla" repeats the variant's own name`},
		{"duplicate name", head + "  - name: vanilla\n    plugin: builtin\n", `registry.yaml:5: variant "vanilla": duplicate name (also defined at line 2)`},
		{"alias clashes with earlier name", head + "  - name: rope\n    aliases: [vanilla]\n    plugin: builtin\n", `registry.yaml:6: variant "rope": alias "vanilla" clashes with the name of variant "vanilla" (line 2)`},
		{"name clashes with earlier alias", head + "    aliases: [rope]\n  - name: rope\n    plugin: builtin\n", `registry.yaml:6: variant "rope": name is already an alias of variant "vanilla" (line 5)`},
		{"alias used twice", head + "    aliases: [mha]\n  - name: rope\n    aliases: [mha]\n    plugin: builtin\n", `registry.yaml:7: variant "rope": alias "mha" is already used by variant "vanilla" (line 5)`},
		{"presets list", head + "    presets: [tiny]\n", `registry.yaml:5: variant "vanilla": presets must be a mapping of preset names to values, not a list`},
		{"invalid preset name", head + "    presets:\n      Tiny: {}\n", `registry.yaml:6: variant "vanilla": invalid preset name "Tiny" (use lower-case letters, digits, '-' and '_', starting with a letter or digit)`},
		{"preset name with dot", head + "    presets:\n      a.b: {}\n", `registry.yaml:6: variant "vanilla": invalid preset name "a.b" (use lower-case letters, digits, '-' and '_', starting with a letter or digit)`},
		{"duplicate preset", head + "    presets:\n      tiny: {}\n      tiny: {}\n", `registry.yaml:7: variant "vanilla": presets: key "tiny" is repeated (first at line 6)`},
		{"preset not mapping", head + "    presets:\n      tiny: 3\n", `registry.yaml:6: variant "vanilla": preset "tiny": want a mapping of hyperparameters to values, not the integer 3`},
		{"preset value list", head + "    presets:\n      tiny: {d_model: [64]}\n", `registry.yaml:6: variant "vanilla": preset "tiny": d_model must be a single value, not a list`},
		{"preset value null", head + "    presets:\n      tiny:\n        d_model:\n", `registry.yaml:7: variant "vanilla": preset "tiny": d_model has no value`},
		{"defaults not mapping", head + "    defaults: 5\n", `registry.yaml:5: variant "vanilla": defaults: want a mapping of hyperparameters to values, not the integer 5`},
		{"defaults dup", head + "    defaults:\n      d_model: 1\n      d_model: 2\n", `registry.yaml:7: variant "vanilla": defaults: key "d_model" is repeated (first at line 6)`},
		{"defaults int key", head + "    defaults: {1: 2}\n", `registry.yaml:5: variant "vanilla": defaults: keys must be strings, got the integer 1`},
		{"defaults huge int", head + "    defaults: {n: !!int 99999999999999999999}\n", `registry.yaml:5: variant "vanilla": defaults: n: integer 99999999999999999999 is out of range`},
		{"defaults binary", head + "    defaults: {n: !!binary aGk=}\n", `registry.yaml:5: variant "vanilla": defaults: n: unsupported YAML tag !!binary`},
		{"merge key", head + "    defaults:\n      <<: {a: 1}\n", `registry.yaml:6: variant "vanilla": defaults: merge keys (<<) are not supported; write the values out`},
		{"env not strings", head + "    env: {A: 1}\n", `registry.yaml:5: variant "vanilla": env: A must be a string, not the integer 1 (quote it: "1")`},
		{"args not list", head + "    args: --x\n", `registry.yaml:5: variant "vanilla": args must be a list of strings, not "--x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse("registry.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error; parsed %v", r.Names())
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestPluginPaths(t *testing.T) {
	src := func(p string) []byte {
		return []byte("variants:\n  - name: a\n    summary: s\n    plugin: " + p + "\n    dev: true\n")
	}
	for _, tc := range []struct{ regPath, plugin, want string }{
		{"/etc/zoo/registry.yaml", "./bin/zoo-a", "/etc/zoo/bin/zoo-a"},
		{"/etc/zoo/registry.yaml", "zoo-a", "/etc/zoo/zoo-a"},
		{"/etc/zoo/registry.yaml", "/opt/zoo-a", "/opt/zoo-a"},
		{"registry.yaml", "zoo-a", "./zoo-a"},
		{"registry.yaml", "./bin/../bin/zoo-a", "bin/zoo-a"},
		{"conf/registry.yaml", "bin/./zoo-a", "conf/bin/zoo-a"},
	} {
		r, err := Parse(tc.regPath, src(tc.plugin))
		if err != nil {
			t.Fatal(err)
		}
		e, _, _ := r.Lookup("a")
		want := tc.want
		if want == "zoo-a" {
			want = "./zoo-a"
		}
		if e.Plugin != filepath.FromSlash(want) || !e.Dev {
			t.Errorf("%s + %s = %s, want %s", tc.regPath, tc.plugin, e.Plugin, want)
		}
	}
}

// TestPluginPathsConfined: a relative plugin path whose ".." leaves the registry's folder is
// refused (`plugin: ../../../../usr/bin/env` with args ran a shell command before zoo found it
// was no plugin); an absolute path says plainly that it runs a program from elsewhere.
func TestPluginPathsConfined(t *testing.T) {
	src := func(p string) []byte {
		return []byte("variants:\n  - name: a\n    summary: s\n    plugin: " + p + "\n")
	}
	for _, p := range []string{"../zoo-a", "../../../../usr/bin/env", "bin/../../zoo-a", ".."} {
		_, err := Parse("conf/registry.yaml", src(p))
		want := `conf/registry.yaml:4: variant "a": plugin "` + p + `" leaves the registry's folder (a relative plugin path is resolved inside conf); write the absolute path of a program outside it`
		if err == nil || err.Error() != want {
			t.Errorf("plugin %s: %v, want %s", p, err, want)
		}
	}
	r, err := Parse("conf/registry.yaml", src("/usr/bin/env"))
	if err != nil {
		t.Fatal(err)
	}
	if e, _, _ := r.Lookup("a"); e.Plugin != "/usr/bin/env" || e.Pinned() {
		t.Errorf("absolute plugin: %+v", e)
	}
	r = mustParse(t, "r.yaml", "variants:\n  - name: a\n    summary: s\n    plugin: ./a\n    sha256: \""+strings.Repeat("ab", 32)+"\"\n  - name: b\n    plugin: builtin\n")
	for _, name := range []string{"a", "b"} {
		if e, _, _ := r.Lookup(name); !e.Pinned() {
			t.Errorf("%s is not pinned", name)
		}
	}
}

func mustParse(t *testing.T, path, src string) *Registry {
	t.Helper()
	r, err := Parse(path, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLookup(t *testing.T) {
	r := mustParse(t, "registry.yaml", `
variants:
  - name: vanilla
    aliases: [mha]
    plugin: builtin
    presets: {tiny: {d_model: 64}, base: {}}
  - name: linformer
    plugin: builtin
  - name: rope
    plugin: builtin
    presets: {tiny: {}}
`)
	for _, tc := range []struct{ ref, name, preset string }{
		{"vanilla", "vanilla", ""},
		{"mha", "vanilla", ""},
		{"vanilla.tiny", "vanilla", "tiny"},
		{"mha.base", "vanilla", "base"},
		{"linformer", "linformer", ""},
	} {
		e, preset, err := r.Lookup(tc.ref)
		if err != nil || e.Name != tc.name || preset != tc.preset {
			t.Errorf("Lookup(%q) = %q, %q, %v", tc.ref, e.Name, preset, err)
		}
	}
	// The returned entry is a copy.
	e, _, _ := r.Lookup("vanilla.tiny")
	e.Presets["tiny"]["d_model"] = int64(1)
	e.Aliases[0] = "x"
	if e2, _, _ := r.Lookup("vanilla"); e2.Presets["tiny"]["d_model"] != int64(64) || e2.Aliases[0] != "mha" {
		t.Error("Lookup result shares storage with the registry")
	}
	for _, tc := range []struct{ ref, want string }{
		{"linformr", `unknown variant "linformr" (did you mean "linformer"?)`},
		{"mhaa", `unknown variant "mhaa" (did you mean "mha"?)`},
		{"bert", `unknown variant "bert"; known variants: vanilla, linformer, rope`},
		{"", `empty variant name in ""; run "zoo list" for the variants`},
		{".tiny", `empty variant name in ".tiny"; run "zoo list" for the variants`},
		{"vanilla.tine", `variant "vanilla" has no preset "tine" (did you mean "tiny"?); presets: base, tiny`},
		{"mha.large", `variant "vanilla" has no preset "large"; presets: base, tiny`},
		{"linformer.tiny", `variant "linformer" has no preset "tiny"; linformer has no presets`},
		{"vanilla.", `empty preset name in "vanilla."; presets: base, tiny`},
		{"vanilla.tiny.x", `variant "vanilla" has no preset "tiny.x" (did you mean "tiny"?); presets: base, tiny`},
	} {
		_, _, err := r.Lookup(tc.ref)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Lookup(%q) error:\n got %v\nwant %s", tc.ref, err, tc.want)
		}
		if !errors.Is(err, ErrUnknown) {
			t.Errorf("Lookup(%q) error does not match ErrUnknown", tc.ref)
		}
	}
	var empty *Registry
	if _, _, err := empty.Lookup("x"); err == nil || err.Error() != `unknown variant "x"; the registry is empty` {
		t.Errorf("nil registry: %v", err)
	}
}

func TestMerge(t *testing.T) {
	base := mustParse(t, "registry.yaml", `
variants:
  - name: vanilla
    aliases: [mha, transformer]
    plugin: builtin
  - name: linformer
    aliases: [lin]
    plugin: builtin
`)
	user := mustParse(t, "/home/u/.config/zoo/registry.yaml", `
variants:
  - name: linformer
    summary: user linformer
    plugin: ./my-linformer
    dev: true
  - name: performer
    aliases: [mha]
    plugin: builtin
`)
	flag := mustParse(t, "extra.yaml", `
variants:
  - name: lin
    plugin: builtin
`)
	m := Merge(base, nil, user, flag)
	if got := m.Names(); !reflect.DeepEqual(got, []string{"vanilla", "linformer", "performer", "lin"}) {
		t.Fatalf("names %v", got)
	}
	user0 := "/home/u/.config/zoo/registry.yaml:"
	for _, tc := range []struct{ ref, name, source string }{
		{"vanilla", "vanilla", "registry.yaml:3"},
		{"transformer", "vanilla", "registry.yaml:3"},
		{"mha", "performer", user0 + "7"},       // the later layer's alias wins
		{"linformer", "linformer", user0 + "3"}, // replaced whole
		{"lin", "lin", "extra.yaml:3"},          // names beat aliases
	} {
		e, _, err := m.Lookup(tc.ref)
		if err != nil || e.Name != tc.name || e.Source != tc.source {
			t.Errorf("Lookup(%q) = %q from %s, %v; want %q from %s", tc.ref, e.Name, e.Source, err, tc.name, tc.source)
		}
	}
	e, _, _ := m.Lookup("linformer")
	if e.Plugin != filepath.FromSlash("/home/u/.config/zoo/my-linformer") || e.Summary != "user linformer" || len(e.Aliases) != 0 {
		t.Errorf("merged linformer %+v", e)
	}
	if got := Merge().Names(); len(got) != 0 {
		t.Errorf("empty merge %v", got)
	}
}

func TestLoadUser(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", dir)
	r, err := LoadUser()
	if r != nil || err != nil {
		t.Fatalf("no file: %v, %v", r, err)
	}
	path, err := UserPath()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte(head), 0o644)
	r, err = LoadUser()
	if err != nil || !reflect.DeepEqual(r.Names(), []string{"vanilla"}) || r.Path != path {
		t.Fatalf("LoadUser = %v, %v", r, err)
	}
	os.WriteFile(path, []byte("variants: [\n"), 0o644)
	if _, err := LoadUser(); err == nil || !strings.HasPrefix(err.Error(), path+":") {
		t.Fatalf("bad file: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "nope.yaml")); err == nil || !strings.HasPrefix(err.Error(), "read registry: open ") {
		t.Fatalf("missing file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "example.yaml")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(head))
	f.Add([]byte(builtin))
	f.Add([]byte("variants:\n  - &a {name: x, plugin: builtin, presets: {t: &p {a: 1}, u: *p}}\n  - *a\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add(hostile.AliasFanout(8))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse("f.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, name := range r.Names() {
			e, _, err := r.Lookup(name)
			if err != nil || e.Name != name {
				t.Fatalf("Lookup(%q) = %v", name, err)
			}
			for _, p := range e.PresetNames() {
				if _, got, err := r.Lookup(name + "." + p); err != nil || got != p {
					t.Fatalf("Lookup(%q.%q) = %v", name, p, err)
				}
			}
			for _, a := range e.Aliases {
				if e2, _, err := r.Lookup(a); err != nil || e2.Name != name {
					t.Fatalf("alias %q does not resolve to %q", a, name)
				}
			}
		}
		_ = Merge(r, r)
	})
}
