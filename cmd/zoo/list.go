package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/registry"
)

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the variants in the registry",
		Description: "A third-party plugin that its registry does not pin by sha256 is marked [unpinned] ([dev] with\n" +
			"dev: true): zoo runs whatever that file holds; see `zoo help registry`." +
			examples("zoo list", "zoo list --json", "zoo list --registry my-variants.yaml"),
		Flags:  []cli.Flag{flagRegistry, flagJSON},
		Action: listAction,
	}
}

type listRow struct {
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

// listAction starts no plugin, ever: a plugin that hangs cannot hang `zoo list`.
func listAction(c *cli.Context) error {
	reg, err := loadRegistry(c)
	if err != nil {
		return err
	}
	cache := describeCache()
	var rows []listRow
	for _, e := range reg.Entries() {
		rows = append(rows, listRowFor(e, cache))
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, rows)
	}
	renderList(c.App.Writer, rows)
	return nil
}

// notDescribed is the table's summary of a third-party plugin that zoo has not started yet.
const notDescribed = "(not described yet: run zoo show %s)"

// listRowFor describes a registry entry without starting its plugin. The registry's summary
// and paper win where the entry has them; the rest comes from Describe: a built-in's, asked
// in process, or the answer the third-party plugin gave when a command last started it
// (cache, valid while the executable is unchanged).
func listRowFor(e registry.Entry, cache *plugin.DescribeCache) listRow {
	row := listRow{Name: e.Name, Aliases: e.Aliases, Summary: e.Summary, Paper: e.Paper, Plugin: e.Plugin, Presets: e.PresetNames(),
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

func renderList(w io.Writer, rows []listRow) {
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
			summary = fmt.Sprintf(notDescribed, r.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.Complexity, strings.Join(r.Presets, ","), summary, r.Paper)
	}
	tw.Flush()
	if unpinned {
		fmt.Fprintln(w, "[unpinned], [dev]: a program the registry does not pin by sha256; zoo runs whatever the file holds (zoo help registry)")
	}
}
