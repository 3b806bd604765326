package variants_test

import (
	"fmt"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/variant"
)

func builtinEntries(t *testing.T) map[string]registry.Entry {
	t.Helper()
	reg, err := registry.Parse("registry.yaml", zoo.RegistryYAML)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]registry.Entry{}
	for _, e := range reg.Entries() {
		if e.IsBuiltin() {
			out[e.Name] = e
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRegistryNamesTheBuiltins checks that registry.yaml's built-in entries and
// variants.Builtin() are the same set: a variant missing from the registry would be unlisted,
// an entry without a variant would fail at run time.
func TestRegistryNamesTheBuiltins(t *testing.T) {
	entries, builtins := builtinEntries(t), variants.Builtin()
	if got, want := sortedKeys(entries), sortedKeys(builtins); !reflect.DeepEqual(got, want) {
		t.Fatalf("registry.yaml's builtin entries %v, variants.Builtin() %v", got, want)
	}
	for name, v := range builtins {
		d := v.Describe()
		if d.Name != name || d.Version == "" || d.Summary == "" || d.Paper == "" || d.Complexity == "" {
			t.Errorf("%s: Describe must carry name, version, summary, paper and cost (the one source of each): %+v", name, d)
		}
		if e := entries[name]; e.Summary != "" || e.Paper != "" {
			t.Errorf("%s: the registry entry repeats the summary or paper of Describe", name)
		}
	}
}

// TestRegistryPresetsResolve resolves every built-in entry's defaults and presets against its
// variant's schema, and builds each tiny preset (every variant has one, for tests): the graph
// records the variant, its version, the resolved config and the seed.
func TestRegistryPresetsResolve(t *testing.T) {
	builtins := variants.Builtin()
	for name, e := range builtinEntries(t) {
		v, ok := builtins[name]
		if !ok {
			continue // TestRegistryNamesTheBuiltins reports it
		}
		d := v.Describe()
		if _, err := variant.Resolve(d, e.Defaults); err != nil {
			t.Errorf("%s defaults: %v", name, err)
		}
		for _, p := range e.PresetNames() {
			cfg, err := variant.Resolve(d, e.Defaults, e.Presets[p])
			if err != nil {
				t.Errorf("%s.%s: %v", name, p, err)
				continue
			}
			if p != "tiny" {
				continue
			}
			g, err := v.Build(t.Context(), cfg, 3)
			if err != nil {
				t.Errorf("%s.tiny: %v", name, err)
				continue
			}
			want := map[string]string{"variant": name, "variant_version": d.Version, "config": cfg.JSON(), "seed": "3"}
			for k, w := range want {
				if g.Meta[k] != w {
					t.Errorf("%s.tiny: graph metadata %s = %q, want %q", name, k, g.Meta[k], w)
				}
			}
		}
		if _, ok := e.Presets["tiny"]; !ok {
			t.Errorf("%s has no tiny preset", name)
		}
	}
}

// TestOneMeaningPerHyperparameter checks that a hyperparameter name has one type and one
// range in every built-in variant (the defaults may differ: linformer's max_len is 4096).
func TestOneMeaningPerHyperparameter(t *testing.T) {
	type meaning struct {
		kind    variant.Kind
		min     string
		choices string
	}
	seen := map[string]meaning{}
	from := map[string]string{}
	for _, name := range sortedKeys(variants.Builtin()) {
		for _, p := range variants.Builtin()[name].Describe().Params {
			m := meaning{kind: p.Kind, choices: strings.Join(p.Choices, ",")}
			if p.Min != nil {
				m.min = fmt.Sprint(*p.Min)
			}
			if prev, ok := seen[p.Name]; ok && prev != m {
				t.Errorf("%s means %+v in %s but %+v in %s", p.Name, prev, from[p.Name], m, name)
				continue
			}
			seen[p.Name], from[p.Name] = m, name
		}
	}
	if seen["scale"].kind != variant.KindFloat {
		t.Errorf("scale is %q, want the float of nn.ScaleParam", seen["scale"].kind)
	}
}

// TestNoVariantImportsAnother checks with go list that an in-tree variant links no sibling
// variant (the shared schema lives in zoo/nn), tests excluded.
func TestNoVariantImportsAnother(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	const prefix = "github.com/zoo-dev/zoo/variants/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		if !strings.HasPrefix(pkg, prefix) || strings.HasPrefix(pkg, prefix+"internal/") {
			continue // variants itself lists them all; internal/ holds test helpers
		}
		checked++
		for _, d := range strings.Fields(deps) {
			if strings.HasPrefix(d, prefix) && !strings.HasPrefix(d, prefix+"internal/") {
				t.Errorf("%s links %s: a variant takes the shared schema from zoo/nn, not from another variant", strings.TrimPrefix(pkg, prefix), strings.TrimPrefix(d, prefix))
			}
		}
	}
	if want := len(variants.Builtin()); checked != want {
		t.Errorf("go list reported %d variant packages, want one per built-in variant (%d)", checked, want)
	}
}
