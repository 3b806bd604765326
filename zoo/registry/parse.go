package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/zoo-dev/zoo/internal/suggest"
)

var (
	topKeys     = []string{"apiVersion", "variants"}
	variantKeys = []string{"name", "aliases", "summary", "paper", "plugin", "sha256", "dev", "args", "env", "defaults", "presets"}
	yamlLineRE  = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// Parse parses registry data read from path (path names the file in errors and anchors relative
// plugin paths; it is not read). Empty data, or a document with no variants, gives an empty
// registry. Anything the schema in the package documentation does not allow is an error of
// the form "path:line: what is wrong": YAML syntax errors, more than one document, unknown
// keys (with a did-you-mean), duplicate keys, wrong value types, a missing name or plugin, a
// missing summary for an executable plugin, a summary or paper for a builtin plugin (the
// variant's Describe carries them), an invalid variant, alias or preset name, duplicate names or aliases (an alias equal
// to any name included), a sha256 that is not 64 hex digits or is set for a builtin plugin,
// and default or preset values that are not scalars.
func Parse(path string, data []byte) (*Registry, error) {
	p := &parser{path: path}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Registry{Path: path}, nil
		}
		return nil, p.yamlErr(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, p.yamlErr(err)
		}
		return nil, p.errf(&extra, "a second YAML document; a registry is a single document (remove the \"---\")")
	}
	if err := p.checkExpansion(&doc, len(data)); err != nil {
		return nil, err
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return &Registry{Path: path}, nil
		}
		root = root.Content[0]
	}
	root = deref(root)
	if isNull(root) {
		return &Registry{Path: path}, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root, "want a mapping with a \"variants\" list at the top, got %s", describe(root))
	}
	fields, err := p.mapping(root, "", topKeys)
	if err != nil {
		return nil, err
	}
	if f, ok := fields["apiVersion"]; ok {
		v, err := p.str(f.val, "", "apiVersion")
		if err != nil {
			return nil, err
		}
		if v != "zoo/v1" {
			return nil, p.errf(f.val, "apiVersion %q is not supported (want zoo/v1)", v)
		}
	}
	reg := &Registry{Path: path}
	f, ok := fields["variants"]
	if !ok || isNull(deref(f.val)) {
		return reg, nil
	}
	list := deref(f.val)
	if list.Kind != yaml.SequenceNode {
		return nil, p.errf(list, "variants must be a list of entries, not %s", describe(list))
	}
	names := map[string]*yaml.Node{}   // name → its node
	aliases := map[string]aliasOwner{} // alias → owner
	for i, item := range list.Content {
		e, nameNode, aliasNodes, err := p.variant(deref(item), i)
		if err != nil {
			return nil, err
		}
		ctx := fmt.Sprintf("variant %q: ", e.Name)
		if prev, ok := names[e.Name]; ok {
			return nil, p.errf(nameNode, "%sduplicate name (also defined at line %d)", ctx, prev.Line)
		}
		if a, ok := aliases[e.Name]; ok {
			return nil, p.errf(nameNode, "%sname is already an alias of variant %q (line %d)", ctx, a.name, a.node.Line)
		}
		names[e.Name] = nameNode
		for j, a := range e.Aliases {
			n := aliasNodes[j]
			if prev, ok := names[a]; ok {
				if a == e.Name {
					return nil, p.errf(n, "%salias %q repeats the variant's own name", ctx, a)
				}
				return nil, p.errf(n, "%salias %q clashes with the name of variant %q (line %d)", ctx, a, a, prev.Line)
			}
			if o, ok := aliases[a]; ok {
				if o.name == e.Name {
					return nil, p.errf(n, "%salias %q is listed twice", ctx, a)
				}
				return nil, p.errf(n, "%salias %q is already used by variant %q (line %d)", ctx, a, o.name, o.node.Line)
			}
			aliases[a] = aliasOwner{e.Name, n}
		}
		reg.entries = append(reg.entries, e)
	}
	return reg, nil
}

// ExpandPerByte and ExpandMin bound alias expansion: every *alias repeats its anchor's
// content, so a document of n bytes may stand for far more (one anchored preset of k keys
// named by k presets is k² values: 3,000 made an 84 KB file take 1.3 GB). Parse walks the
// document as if aliases were written out and refuses one whose expanded size exceeds
// ExpandPerByte nodes a byte of the file (at least ExpandMin nodes), before it builds anything.
const (
	ExpandPerByte = 4
	ExpandMin     = 1 << 16
)

// checkExpansion counts the nodes of doc with every alias expanded (each anchored subtree's
// size counted once, then added at each alias) and refuses doc, naming the alias that crosses
// the limit, when they exceed the limit for a document of size bytes.
func (p *parser) checkExpansion(doc *yaml.Node, size int) error {
	limit := max(ExpandPerByte*int64(size), ExpandMin)
	sizes := map[*yaml.Node]int64{}
	var sizeOf func(n *yaml.Node, depth int) int64
	sizeOf = func(n *yaml.Node, depth int) int64 {
		if n == nil {
			return 0
		}
		if s, ok := sizes[n]; ok {
			return s
		}
		if depth > 1000 { // yaml.v3 nests no deeper; an alias to an ancestor would loop
			return limit + 1
		}
		s := int64(1)
		if n.Kind == yaml.AliasNode {
			s = sizeOf(n.Alias, depth+1)
		} else {
			for _, c := range n.Content {
				s = min(s+sizeOf(c, depth+1), limit+1)
			}
		}
		sizes[n] = s
		return s
	}
	var total int64
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		if n == nil {
			return nil
		}
		if n.Kind == yaml.AliasNode {
			total += sizeOf(n, 0)
		} else {
			total++
		}
		if total > limit {
			return p.errf(n, "YAML aliases expand the registry (%d bytes) to more than %d nodes, the limit for its size; *%s repeats the anchor &%s (write the values out, or name it less often)", size, limit, n.Value, n.Value)
		}
		if n.Kind != yaml.AliasNode {
			for _, c := range n.Content {
				if err := walk(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(doc)
}

type aliasOwner struct {
	name string
	node *yaml.Node
}

type parser struct {
	path string
}

type field struct{ key, val *yaml.Node }

func (p *parser) errf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.path, n.Line, fmt.Sprintf(format, args...))
}

// yamlErr turns yaml.v3's "yaml: line 3: ..." into "path:3: ...".
func (p *parser) yamlErr(err error) error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s:%s: %s", p.path, m[1], m[2])
	}
	return fmt.Errorf("%s: %s", p.path, strings.TrimPrefix(msg, "yaml: "))
}

// deref follows YAML aliases (*name) to the anchored node.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's type for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!int":
			return "the integer " + n.Value
		case "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		case "!!str":
			return strconv.Quote(n.Value)
		}
		return n.ShortTag() + " " + n.Value
	}
	return "an alias"
}

// mapping returns a mapping's fields by key, rejecting non-string, duplicate and (when allowed
// is non-nil) unknown keys.
func (p *parser) mapping(n *yaml.Node, ctx string, allowed []string) (map[string]field, error) {
	out := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				return nil, p.errf(k, "%smerge keys (<<) are not supported; write the values out", ctx)
			}
			return nil, p.errf(k, "%skeys must be strings, got %s", ctx, describe(k))
		}
		if allowed != nil && !contains(allowed, k.Value) {
			return nil, p.errf(k, "%sunknown key %q%s", ctx, k.Value, hint(k.Value, allowed))
		}
		if prev, ok := out[k.Value]; ok {
			return nil, p.errf(k, "%skey %q is repeated (first at line %d)", ctx, k.Value, prev.key.Line)
		}
		out[k.Value] = field{k, v}
	}
	return out, nil
}

func hint(name string, allowed []string) string {
	if h := suggest.DidYouMean(name, allowed); h != "" {
		return h
	}
	return " (known keys: " + strings.Join(allowed, ", ") + ")"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// str returns a string scalar, or an error that says how to fix another type.
func (p *parser) str(n *yaml.Node, ctx, key string) (string, error) {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return n.Value, nil
	}
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		return "", p.errf(n, "%s%s must be a string, not %s (quote it: %q)", ctx, key, describe(n), n.Value)
	}
	return "", p.errf(n, "%s%s must be a string, not %s", ctx, key, describe(n))
}

// variant parses one entry of the variants list; i is its 0-based index.
func (p *parser) variant(n *yaml.Node, i int) (Entry, *yaml.Node, []*yaml.Node, error) {
	ctx := fmt.Sprintf("variant #%d: ", i+1)
	if n.Kind != yaml.MappingNode {
		return Entry{}, nil, nil, p.errf(n, "%swant a mapping with name and plugin (and a summary for an executable plugin), got %s", ctx, describe(n))
	}
	// The name first, so that every later error can say which variant it is about.
	var e Entry
	var nameNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := deref(n.Content[i]); k.Kind == yaml.ScalarNode && k.Value == "name" {
			name, err := p.str(n.Content[i+1], ctx, "name")
			if err != nil {
				return Entry{}, nil, nil, err
			}
			nameNode = deref(n.Content[i+1])
			if !identRE.MatchString(name) {
				return Entry{}, nil, nil, p.errf(nameNode, "%sinvalid name %q (use lower-case letters, digits, '-' and '_', starting with a letter or digit)", ctx, name)
			}
			e.Name = name
			ctx = fmt.Sprintf("variant %q: ", name)
			break
		}
	}
	fields, err := p.mapping(n, ctx, variantKeys)
	if err != nil {
		return Entry{}, nil, nil, err
	}
	for _, req := range []string{"name", "plugin"} {
		if _, ok := fields[req]; !ok {
			return Entry{}, nil, nil, p.errf(n, "%smissing required key %q", ctx, req)
		}
	}
	e.Source = fmt.Sprintf("%s:%d", p.path, n.Line)
	pluginNode := deref(fields["plugin"].val)
	plugin, err := p.str(pluginNode, ctx, "plugin")
	if err != nil {
		return Entry{}, nil, nil, err
	}
	switch {
	case plugin == "":
		return Entry{}, nil, nil, p.errf(pluginNode, "%splugin is empty (want builtin or the path of an executable)", ctx)
	case plugin == Builtin:
		e.Plugin = Builtin
	case filepath.IsAbs(plugin):
		e.Plugin = filepath.Clean(plugin)
	case !filepath.IsLocal(plugin):
		// A relative path is resolved inside the registry's folder: one that leaves it
		// (../../usr/bin/env) would run any program on the machine from a file that looks
		// like it names a plugin beside it.
		return Entry{}, nil, nil, p.errf(pluginNode, "%splugin %q leaves the registry's folder (a relative plugin path is resolved inside %s); write the absolute path of a program outside it", ctx, plugin, filepath.Dir(p.path))
	default:
		e.Plugin = filepath.Join(filepath.Dir(p.path), plugin)
		if !strings.ContainsRune(e.Plugin, filepath.Separator) {
			e.Plugin = "." + string(filepath.Separator) + e.Plugin // never a $PATH lookup
		}
	}
	// A built-in variant describes itself (Describe): its summary and paper have one source.
	// A third-party entry carries its summary so that zoo list need not start the plugin.
	for _, key := range []string{"summary", "paper"} {
		f, ok := fields[key]
		switch {
		case ok && e.Plugin == Builtin:
			return Entry{}, nil, nil, p.errf(f.key, "%s%s comes from the built-in variant itself (zoo show %s); remove it for plugin: builtin", ctx, key, e.Name)
		case ok:
			v, err := p.str(f.val, ctx, key)
			if err != nil {
				return Entry{}, nil, nil, err
			}
			if key == "summary" {
				e.Summary = v
			} else {
				e.Paper = v
			}
		case key == "summary" && e.Plugin != Builtin:
			return Entry{}, nil, nil, p.errf(n, "%smissing required key \"summary\" (one line for zoo list; required for an executable plugin)", ctx)
		}
	}
	if f, ok := fields["sha256"]; ok {
		v, err := p.str(f.val, ctx, "sha256")
		if err != nil {
			return Entry{}, nil, nil, err
		}
		if !hexRE.MatchString(v) {
			return Entry{}, nil, nil, p.errf(deref(f.val), "%ssha256 must be 64 hex digits, got %q (%d characters)", ctx, v, len(v))
		}
		if e.Plugin == Builtin {
			return Entry{}, nil, nil, p.errf(f.key, "%ssha256 pins an executable plugin; remove it for plugin: builtin", ctx)
		}
		e.SHA256 = strings.ToLower(v)
	}
	if f, ok := fields["dev"]; ok {
		v := deref(f.val)
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
			return Entry{}, nil, nil, p.errf(v, "%sdev must be true or false, not %s", ctx, describe(v))
		}
		e.Dev = v.Value == "true" || v.Value == "True" || v.Value == "TRUE"
	}
	var aliasNodes []*yaml.Node
	if f, ok := fields["aliases"]; ok {
		list, err := p.strList(f.val, ctx, "aliases")
		if err != nil {
			return Entry{}, nil, nil, err
		}
		for _, an := range list {
			if !identRE.MatchString(an.Value) {
				return Entry{}, nil, nil, p.errf(an, "%sinvalid alias %q (use lower-case letters, digits, '-' and '_', starting with a letter or digit)", ctx, an.Value)
			}
			e.Aliases = append(e.Aliases, an.Value)
			aliasNodes = append(aliasNodes, an)
		}
	}
	if f, ok := fields["args"]; ok {
		list, err := p.strList(f.val, ctx, "args")
		if err != nil {
			return Entry{}, nil, nil, err
		}
		for _, a := range list {
			e.Args = append(e.Args, a.Value)
		}
	}
	if f, ok := fields["env"]; ok {
		v := deref(f.val)
		if !isNull(v) {
			if v.Kind != yaml.MappingNode {
				return Entry{}, nil, nil, p.errf(v, "%senv must be a mapping of names to strings, not %s", ctx, describe(v))
			}
			kv, err := p.mapping(v, ctx+"env: ", nil)
			if err != nil {
				return Entry{}, nil, nil, err
			}
			e.Env = map[string]string{}
			for k, fv := range kv {
				s, err := p.str(fv.val, ctx+"env: ", k)
				if err != nil {
					return Entry{}, nil, nil, err
				}
				e.Env[k] = s
			}
		}
	}
	if f, ok := fields["defaults"]; ok {
		if e.Defaults, err = p.values(f.val, ctx+"defaults: "); err != nil {
			return Entry{}, nil, nil, err
		}
	}
	if f, ok := fields["presets"]; ok {
		v := deref(f.val)
		if !isNull(v) {
			if v.Kind != yaml.MappingNode {
				return Entry{}, nil, nil, p.errf(v, "%spresets must be a mapping of preset names to values, not %s", ctx, describe(v))
			}
			kv, err := p.mapping(v, ctx+"presets: ", nil)
			if err != nil {
				return Entry{}, nil, nil, err
			}
			e.Presets = map[string]map[string]any{}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k := deref(v.Content[i])
				if !identRE.MatchString(k.Value) {
					return Entry{}, nil, nil, p.errf(k, "%sinvalid preset name %q (use lower-case letters, digits, '-' and '_', starting with a letter or digit)", ctx, k.Value)
				}
				vals, err := p.values(kv[k.Value].val, fmt.Sprintf("%spreset %q: ", ctx, k.Value))
				if err != nil {
					return Entry{}, nil, nil, err
				}
				if vals == nil {
					vals = map[string]any{}
				}
				e.Presets[k.Value] = vals
			}
		}
	}
	return e, nameNode, aliasNodes, nil
}

// strList returns the nodes of a list of strings.
func (p *parser) strList(n *yaml.Node, ctx, key string) ([]*yaml.Node, error) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, "%s%s must be a list of strings, not %s", ctx, key, describe(n))
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, c := range n.Content {
		if _, err := p.str(c, ctx, key+" entry"); err != nil {
			return nil, err
		}
		out = append(out, deref(c))
	}
	return out, nil
}

// values decodes a mapping of hyperparameter names to scalars (null gives nil).
func (p *parser) values(n *yaml.Node, ctx string) (map[string]any, error) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "%swant a mapping of hyperparameters to values, not %s", strings.TrimSuffix(ctx, ": ")+": ", describe(n))
	}
	kv, err := p.mapping(n, ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(kv))
	for k, f := range kv {
		if k == "" {
			return nil, p.errf(f.key, "%sempty hyperparameter name", ctx)
		}
		v, err := p.scalar(f.val, ctx, k)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// scalar decodes a YAML scalar to int64, float64, bool or string.
func (p *parser) scalar(n *yaml.Node, ctx, key string) (any, error) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode {
		return nil, p.errf(n, "%s%s must be a single value, not %s", ctx, key, describe(n))
	}
	switch n.ShortTag() {
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil {
			return nil, p.errf(n, "%s%s: integer %s is out of range", ctx, key, n.Value)
		}
		return v, nil
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil {
			return nil, p.errf(n, "%s%s: bad number %s", ctx, key, n.Value)
		}
		return v, nil
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return nil, p.errf(n, "%s%s: bad boolean %s", ctx, key, n.Value)
		}
		return v, nil
	case "!!str", "!!timestamp":
		return n.Value, nil
	case "!!null":
		return nil, p.errf(n, "%s%s has no value", ctx, key)
	}
	return nil, p.errf(n, "%s%s: unsupported YAML tag %s", ctx, key, n.ShortTag())
}
