package list

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// TestListRowSources: the registry's summary and paper win where the entry has them; else
// Describe (built-in: in process; third-party: the cache); else the table says how to fill
// the cache. No plugin starts (the third-party paths do not even exist as programs).
func TestListRowSources(t *testing.T) {
	dir := t.TempDir()
	described, unknown := filepath.Join(dir, "described"), filepath.Join(dir, "unknown")
	for _, p := range []string{described, unknown} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache := &plugin.DescribeCache{Path: filepath.Join(dir, "cache.json")}
	if err := cache.Store(described, variant.Description{Name: "d", Summary: "from Describe", Paper: "https://paper", Complexity: "O(n)"}); err != nil {
		t.Fatal(err)
	}
	vanilla := variants.Builtin()["vanilla"].Describe()
	cases := []struct {
		name  string
		entry registry.Entry
		want  Row
		table string // what the table shows as the summary
	}{
		{"builtin from Describe", registry.Entry{Name: "vanilla", Plugin: registry.Builtin},
			Row{Summary: vanilla.Summary, Paper: vanilla.Paper, Complexity: vanilla.Complexity, Described: true}, vanilla.Summary},
		{"builtin registry wins", registry.Entry{Name: "vanilla", Plugin: registry.Builtin, Summary: "mine", Paper: "https://mine"},
			Row{Summary: "mine", Paper: "https://mine", Complexity: vanilla.Complexity, Described: true}, "mine"},
		{"third-party cached", registry.Entry{Name: "d", Plugin: described},
			Row{Summary: "from Describe", Paper: "https://paper", Complexity: "O(n)", Described: true}, "from Describe"},
		{"third-party registry wins", registry.Entry{Name: "d", Plugin: described, Summary: "mine"},
			Row{Summary: "mine", Paper: "https://paper", Complexity: "O(n)", Described: true}, "mine"},
		{"third-party not described", registry.Entry{Name: "u", Plugin: unknown},
			Row{}, fmt.Sprintf(NotDescribed, "u")},
		{"third-party not described, registry summary", registry.Entry{Name: "u", Plugin: unknown, Summary: "mine"},
			Row{Summary: "mine"}, "mine"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := RowFor(c.entry, cache)
			c.want.Name, c.want.Plugin, c.want.Pinned = c.entry.Name, c.entry.Plugin, c.entry.IsBuiltin()
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("row %+v, want %+v", got, c.want)
			}
			var b bytes.Buffer
			Render(&b, []Row{got})
			if !strings.Contains(b.String(), c.table) {
				t.Errorf("table lacks %q:\n%s", c.table, b.String())
			}
			if unpinned := strings.Contains(b.String(), c.entry.Name+" [unpinned]"); unpinned == c.entry.IsBuiltin() {
				t.Errorf("[unpinned] is %v for %s:\n%s", unpinned, c.entry.Plugin, b.String())
			}
		})
	}
}

// TestListMarksUnpinned: `zoo list` marks a third-party plugin without a sha256 pin, says what
// the mark means, and says dev for a development build; pinned and built-in entries are not
// marked, and --json carries pinned for each.
func TestListMarksUnpinned(t *testing.T) {
	rows := []Row{
		RowFor(registry.Entry{Name: "vanilla", Plugin: registry.Builtin}, nil),
		RowFor(registry.Entry{Name: "pinned", Plugin: "/bin/p", SHA256: strings.Repeat("ab", 32), Summary: "s"}, &plugin.DescribeCache{Path: filepath.Join(t.TempDir(), "c.json")}),
		RowFor(registry.Entry{Name: "loose", Plugin: "/bin/l", Summary: "s"}, &plugin.DescribeCache{Path: filepath.Join(t.TempDir(), "c.json")}),
		RowFor(registry.Entry{Name: "wip", Plugin: "/bin/w", Summary: "s", Dev: true}, &plugin.DescribeCache{Path: filepath.Join(t.TempDir(), "c.json")}),
	}
	var b bytes.Buffer
	Render(&b, rows)
	out := b.String()
	for _, want := range []string{"loose [unpinned]", "wip [dev]", UnpinnedNote} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"vanilla [", "pinned ["} {
		if strings.Contains(out, not) {
			t.Errorf("list has %q:\n%s", not, out)
		}
	}
	if !rows[0].Pinned || !rows[1].Pinned || rows[2].Pinned || rows[3].Pinned || !rows[3].Dev {
		t.Errorf("rows %+v", rows)
	}
	b.Reset()
	Render(&b, rows[:2])
	if strings.Contains(b.String(), "[unpinned]") {
		t.Errorf("a list of pinned entries explains the mark:\n%s", b.String())
	}
}
