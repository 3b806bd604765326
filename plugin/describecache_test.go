package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/zoo/variant"
)

func TestDescribeCache(t *testing.T) {
	desc := variant.Description{Name: "th", Version: "1.2.3", Summary: "talking heads", Paper: "https://arxiv.org/abs/2003.02436", Complexity: "O(n²)"}
	want := plugin.CachedDescription{Name: "th", Version: "1.2.3", Summary: "talking heads", Paper: "https://arxiv.org/abs/2003.02436", Complexity: "O(n²)"}
	// Each case stores the description of a fresh executable, changes something, and looks
	// it up again.
	cases := []struct {
		name   string
		change func(t *testing.T, exe, cache string)
		hit    bool
	}{
		{name: "unchanged", change: func(*testing.T, string, string) {}, hit: true},
		{name: "mtime", change: func(t *testing.T, exe, _ string) {
			st, _ := os.Stat(exe)
			touch(t, exe, st.ModTime().Add(time.Second))
		}},
		{name: "size", change: func(t *testing.T, exe, _ string) {
			st, _ := os.Stat(exe)
			write(t, exe, "#!/bin/sh\n# version 2, longer\n")
			touch(t, exe, st.ModTime())
		}},
		{name: "content with size and mtime kept", change: func(t *testing.T, exe, _ string) {
			st, _ := os.Stat(exe)
			write(t, exe, "#!/bin/sh\n# version 2\n")
			touch(t, exe, st.ModTime())
		}},
		{name: "removed", change: func(t *testing.T, exe, _ string) { os.Remove(exe) }},
		{name: "corrupt cache", change: func(t *testing.T, _, cache string) { write(t, cache, "{not json") }},
		{name: "other cache version", change: func(t *testing.T, _, cache string) {
			data, _ := os.ReadFile(cache)
			write(t, cache, strings.Replace(string(data), `"version": 1`, `"version": 99`, 1))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "plugin")
			write(t, exe, "#!/bin/sh\n# version 1\n")
			cache := &plugin.DescribeCache{Path: filepath.Join(dir, "cache", "describe-cache.json")}
			if _, ok := cache.Lookup(exe); ok {
				t.Fatal("hit in an empty cache")
			}
			if err := cache.Store(exe, desc); err != nil {
				t.Fatal(err)
			}
			if got, ok := cache.Lookup(exe); !ok || got != want {
				t.Fatalf("right after Store: %+v, %v", got, ok)
			}
			c.change(t, exe, cache.Path)
			got, ok := cache.Lookup(exe)
			if ok != c.hit || (ok && got != want) {
				t.Errorf("Lookup = %+v, %v; want hit %v", got, ok, c.hit)
			}
			if _, err := os.Stat(exe); err != nil {
				return
			}
			// A miss is repaired by the next Store, whatever the cache file held.
			if err := cache.Store(exe, desc); err != nil {
				t.Fatal(err)
			}
			if got, ok := cache.Lookup(exe); !ok || got != want {
				t.Errorf("after a second Store: %+v, %v", got, ok)
			}
		})
	}
}

// TestDescribeCacheFile checks the file itself: keyed by absolute path, entries of removed
// executables dropped, no temporary files left.
func TestDescribeCacheFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, a, "a")
	write(t, b, "bb")
	cache := &plugin.DescribeCache{Path: filepath.Join(dir, "c.json")}
	t.Chdir(dir)
	for _, exe := range []string{"a", b} { // a relative path too
		if err := cache.Store(exe, variant.Description{Name: filepath.Base(exe)}); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(b)
	write(t, a, "a2")
	if err := cache.Store(a, variant.Description{Name: "a2"}); err != nil {
		t.Fatal(err)
	}
	var f struct {
		Plugins map[string]struct{ Describe plugin.CachedDescription }
	}
	data, err := os.ReadFile(cache.Path)
	if err != nil || json.Unmarshal(data, &f) != nil {
		t.Fatalf("cache file %q: %v", data, err)
	}
	if len(f.Plugins) != 1 || f.Plugins[a].Describe.Name != "a2" {
		t.Errorf("entries %+v, want only %s (a2)", f.Plugins, a)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
}

func touch(t *testing.T, path string, m time.Time) {
	t.Helper()
	if err := os.Chtimes(path, m, m); err != nil {
		t.Fatal(err)
	}
}
