// Package registry reads registry.yaml, the list of variants zoo knows, and resolves model
// references ("name", "alias", "name.preset") against it.
//
// Schema (name and plugin are required, and summary for an executable plugin; every other key
// is optional; any other key is an error):
//
//	apiVersion: zoo/v1                 # optional; only zoo/v1 exists
//	variants:
//	  - name: myattn                   # [a-z0-9][a-z0-9_-]*, unique across names and aliases
//	    aliases: [ma]                  # other names that resolve to this entry
//	    summary: "for zoo list"        # required for an executable; not allowed for builtin
//	    paper: "https://arxiv.org/…"   # optional for an executable; not allowed for builtin
//	    plugin: ./myattn               # builtin, an executable in the registry file's folder, or an absolute path
//	    sha256: "<64 hex digits>"      # pins an executable plugin; not allowed for builtin
//	    dev: false                     # true: a development build, rebuilt too often to pin
//	    args: ["--flag"]               # extra arguments for an executable plugin
//	    env: {KEY: value}              # extra environment for an executable plugin
//	    defaults: {d_model: 512}       # overrides of the plugin's own defaults
//	    presets:                       # name.preset or --preset; names like variant names
//	      tiny: {d_model: 64, heads: 4, layers: 2, d_ff: 128}
//	      base: {}                     # (an empty value means no overrides)
//
// A built-in entry (plugin: builtin) names a variant the zoo binary serves; its summary and
// paper come from that variant's Describe, the one place they are written, so the entry has
// neither (Entry.Summary and Entry.Paper are empty). A third-party entry carries its summary,
// so that a listing of the registry can show it without starting the plugin.
//
// Default and preset values must be YAML scalars; they are decoded to int64, float64, bool or
// string, the types variant.Resolve accepts. Whether their names and values fit a variant's
// hyperparameter schema is checked later, by variant.Resolve.
//
// Trust: a registry is code, like a Makefile: each entry names a program that zoo runs with
// the user's rights. A relative plugin path is resolved inside the registry file's folder; one
// whose ".." leaves it is refused (write an absolute path to run a program elsewhere). An entry
// with sha256 pins its executable: zoo refuses to start a file whose digest differs. An entry
// without one is unpinned: zoo runs whatever the file holds at the time (Pinned is false);
// `zoo list` marks such entries and --require-pinned (ZOO_REQUIRE_PINNED=1) refuses to start them.
//
// Errors name the file and line: `registry.yaml:12: variant "linformer": unknown key "prests"
// (did you mean "presets"?)`. Layers are merged with Merge: the built-in file, then the user's
// os.UserConfigDir()/zoo/registry.yaml (LoadUser), then --registry FILE.
package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/internal/suggest"
)

// Builtin is the plugin value of variants served by the zoo binary itself.
const Builtin = "builtin"

// Entry is one variant of the registry.
type Entry struct {
	Name    string
	Aliases []string
	// Summary and Paper are the registry's one-line description and paper link of an
	// executable plugin; both are empty for a built-in entry, whose variant's Describe
	// carries them (callers show Describe's for IsBuiltin entries).
	Summary string
	Paper   string
	// Plugin is Builtin, or the path of an executable plugin, resolved against the directory
	// of the registry file that declared it (absolute paths are kept as they are).
	Plugin string
	// SHA256 is the lower-case hex digest pinning an executable plugin, or "".
	SHA256 string
	Dev    bool
	Args   []string
	Env    map[string]string
	// Defaults and each preset map hyperparameter names to int64, float64, bool or string.
	Defaults map[string]any
	Presets  map[string]map[string]any
	// Source is where the entry was declared, "path:line", for error messages.
	Source string
}

// IsBuiltin reports whether the zoo binary itself serves the variant.
func (e Entry) IsBuiltin() bool { return e.Plugin == Builtin }

// Pinned reports whether zoo knows the program the entry runs: a built-in, or an executable
// pinned by sha256.
func (e Entry) Pinned() bool { return e.IsBuiltin() || e.SHA256 != "" }

// PresetNames returns the entry's preset names, sorted.
func (e Entry) PresetNames() []string {
	out := make([]string, 0, len(e.Presets))
	for k := range e.Presets {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// clone returns a deep copy, so callers cannot change the registry through it.
func (e Entry) clone() Entry {
	c := e
	c.Aliases = append([]string(nil), e.Aliases...)
	c.Args = append([]string(nil), e.Args...)
	if e.Env != nil {
		c.Env = make(map[string]string, len(e.Env))
		for k, v := range e.Env {
			c.Env[k] = v
		}
	}
	c.Defaults = cloneMap(e.Defaults)
	if e.Presets != nil {
		c.Presets = make(map[string]map[string]any, len(e.Presets))
		for k, v := range e.Presets {
			c.Presets[k] = cloneMap(v)
		}
	}
	return c
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Registry is a parsed (or merged) set of entries. The zero value and nil are empty registries.
type Registry struct {
	// Path is the file the registry was parsed from ("" for a merged registry).
	Path    string
	entries []Entry
	layer   []int // for merged registries: the layer each entry came from
}

// Entries returns copies of the entries in declaration order (merged registries: entries of the
// first layer first, overridden entries in their original place, new ones appended).
func (r *Registry) Entries() []Entry {
	if r == nil {
		return nil
	}
	out := make([]Entry, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.clone()
	}
	return out
}

// Names returns the variant names in declaration order.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.Name
	}
	return out
}

// Merge combines registries in order of precedence, lowest first: an entry of a later layer
// replaces the whole entry of the same name from earlier layers, and new names are added.
// Nil layers are skipped. When aliases collide across layers, a name always wins over an alias,
// and among aliases the later layer wins. It never fails: each layer was validated by Parse.
func Merge(layers ...*Registry) *Registry {
	out := &Registry{}
	index := map[string]int{}
	for li, l := range layers {
		if l == nil {
			continue
		}
		for _, e := range l.entries {
			if i, ok := index[e.Name]; ok {
				out.entries[i] = e
				out.layer[i] = li
				continue
			}
			index[e.Name] = len(out.entries)
			out.entries = append(out.entries, e)
			out.layer = append(out.layer, li)
		}
	}
	return out
}

// ErrUnknown is matched (with errors.Is) by Lookup's errors for an unknown variant or preset.
var ErrUnknown = errors.New("unknown variant or preset")

type lookupError struct{ msg string }

func (e *lookupError) Error() string        { return e.msg }
func (e *lookupError) Is(target error) bool { return target == ErrUnknown }

// Lookup resolves ref — "name", "alias", "name.preset" or "alias.preset" — and returns a copy of
// the entry and the preset ("" when ref names none). An unknown variant is an error with a
// did-you-mean over names and aliases (or the list of variants); an unknown preset is an error
// listing the variant's presets. Both match ErrUnknown.
func (r *Registry) Lookup(ref string) (Entry, string, error) {
	name, preset, hasPreset := strings.Cut(ref, ".")
	if name == "" {
		return Entry{}, "", &lookupError{fmt.Sprintf("empty variant name in %q; run \"zoo list\" for the variants", ref)}
	}
	e, ok := r.find(name)
	if !ok {
		var cands []string
		if r != nil {
			for _, e := range r.entries {
				cands = append(cands, e.Name)
				cands = append(cands, e.Aliases...)
			}
		}
		hint := suggest.DidYouMean(name, cands)
		if hint == "" {
			if names := r.Names(); len(names) > 0 {
				hint = "; known variants: " + strings.Join(names, ", ")
			} else {
				hint = "; the registry is empty"
			}
		}
		return Entry{}, "", &lookupError{fmt.Sprintf("unknown variant %q%s", name, hint)}
	}
	if hasPreset {
		if _, ok := e.Presets[preset]; !ok {
			names := e.PresetNames()
			if preset == "" {
				return Entry{}, "", &lookupError{fmt.Sprintf("empty preset name in %q; %s", ref, presetList(e.Name, names))}
			}
			return Entry{}, "", &lookupError{fmt.Sprintf("variant %q has no preset %q%s; %s", e.Name, preset, suggest.DidYouMean(preset, names), presetList(e.Name, names))}
		}
	}
	return e.clone(), preset, nil
}

func presetList(name string, names []string) string {
	if len(names) == 0 {
		return fmt.Sprintf("%s has no presets", name)
	}
	return "presets: " + strings.Join(names, ", ")
}

// find resolves a name or alias: names first, then aliases, the latest layer winning.
func (r *Registry) find(name string) (Entry, bool) {
	if r == nil {
		return Entry{}, false
	}
	for _, e := range r.entries {
		if e.Name == name {
			return e, true
		}
	}
	best, bestLayer := -1, -1
	for i, e := range r.entries {
		for _, a := range e.Aliases {
			l := 0
			if r.layer != nil {
				l = r.layer[i]
			}
			if a == name && l >= bestLayer {
				best, bestLayer = i, l
			}
		}
	}
	if best < 0 {
		return Entry{}, false
	}
	return r.entries[best], true
}

// UserPath returns os.UserConfigDir()/zoo/registry.yaml, or an error when the user has no
// configuration directory (no $HOME or $XDG_CONFIG_HOME).
func UserPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("user registry: %w", err)
	}
	return filepath.Join(dir, "zoo", "registry.yaml"), nil
}

// LoadUser reads and parses the user's registry (UserPath). It returns nil and no error when
// the file does not exist or the user has no configuration directory; a file that cannot be
// read or does not parse is an error naming it.
func LoadUser() (*Registry, error) {
	path, err := UserPath()
	if err != nil {
		return nil, nil
	}
	r, err := LoadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return r, err
}

// LoadFile reads and parses the registry file at path. A read error is returned wrapped as
// "read registry: ..." (errors.Is(err, fs.ErrNotExist) holds for a missing file); a parse
// error is Parse's.
func LoadFile(path string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read registry: %w", err)
	}
	return Parse(path, data)
}

var identRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
var hexRE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
