// Package list describes the variants of a registry for `zoo list` without starting any
// plugin: a built-in's Describe is asked in process, a third-party plugin's comes from the
// answer it gave when a command last started it (plugin.DescribeCache), and the registry's
// own summary and paper win where an entry has them.
package list

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/registry"
)

// Row is one variant of the list; --json prints the rows.
type Row struct {
	Name       string   `json:"name"`
	Aliases    []string `json:"aliases,omitempty"`
	Summary    string   `json:"summary"`
	Paper      string   `json:"paper,omitempty"`
	Complexity string   `json:"complexity,omitempty"`
	Plugin     string   `json:"plugin"`
	Presets    []string `json:"presets,omitempty"`
	// Described says whether zoo knows the plugin's Describe answer without starting it
	// (always for built-ins; for third-party plugins, once a command has started it).
	Described bool `json:"described"`
	// Pinned: a built-in, or a plugin whose executable the registry pins by sha256; Dev: the
	// entry says it is a development build (dev: true).
	Pinned bool `json:"pinned"`
	Dev    bool `json:"dev,omitempty"`
}

// NotDescribed is the table's summary of a third-party plugin that zoo has not started yet.
const NotDescribed = "(not described yet: run zoo show %s)"

// RowFor describes a registry entry without starting its plugin. The registry's summary
// and paper win where the entry has them; the rest comes from Describe: a built-in's, asked
// in process, or the answer the third-party plugin gave when a command last started it
// (cache, valid while the executable is unchanged).
func RowFor(e registry.Entry, cache *plugin.DescribeCache) Row {
	row := Row{Name: e.Name, Aliases: e.Aliases, Summary: e.Summary, Paper: e.Paper, Plugin: e.Plugin, Presets: e.PresetNames(),
		Pinned: e.Pinned(), Dev: e.Dev && !e.IsBuiltin()}
	var d plugin.CachedDescription
	if e.IsBuiltin() {
		if v, ok := variants.Builtin()[e.Name]; ok {
			bd := v.Describe()
			d, row.Described = plugin.CachedDescription{Summary: bd.Summary, Paper: bd.Paper, Complexity: bd.Complexity}, true
		}
	} else {
		d, row.Described = cache.Lookup(e.Plugin)
	}
	if row.Summary == "" {
		row.Summary = d.Summary
	}
	if row.Paper == "" {
		row.Paper = d.Paper
	}
	row.Complexity = d.Complexity
	return row
}

// Rows describes every entry of reg, in its order.
func Rows(reg *registry.Registry, cache *plugin.DescribeCache) []Row {
	var rows []Row
	for _, e := range reg.Entries() {
		rows = append(rows, RowFor(e, cache))
	}
	return rows
}

// UnpinnedNote follows the table when a row is marked [unpinned] or [dev].
const UnpinnedNote = "[unpinned], [dev]: a program the registry does not pin by sha256; zoo runs whatever the file holds (zoo help registry)"

// Render prints the rows as a table; a third-party plugin that is not pinned is marked
// [unpinned] ([dev] for a development build), and a note under the table says what that means.
func Render(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCOST\tPRESETS\tSUMMARY\tPAPER")
	unpinned := false
	for _, r := range rows {
		name := r.Name
		if len(r.Aliases) > 0 {
			name += " (" + strings.Join(r.Aliases, ", ") + ")"
		}
		switch {
		case r.Pinned:
		case r.Dev:
			name, unpinned = name+" [dev]", true
		default:
			name, unpinned = name+" [unpinned]", true
		}
		summary := r.Summary
		if summary == "" && !r.Described {
			summary = fmt.Sprintf(NotDescribed, r.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.Complexity, strings.Join(r.Presets, ","), summary, r.Paper)
	}
	tw.Flush()
	if unpinned {
		fmt.Fprintln(w, UnpinnedNote)
	}
}
