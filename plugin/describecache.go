package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/zoo-dev/zoo/zoo/variant"
)

// DescribeCache remembers what plugin executables answered to Describe, so that a listing
// (`zoo list`) can show third-party plugins without starting them. An entry is keyed by the
// executable's absolute path and is valid only while the file's size, modification time and
// sha256 are those it had when the entry was stored. The cache is one JSON file, replaced
// atomically (write, then rename); a missing, unreadable or corrupt file is an empty cache,
// rewritten by the next Store. It is a cache: losing it costs one plugin start.
type DescribeCache struct {
	// Path is the cache file, e.g. DefaultDescribeCachePath().
	Path string
}

// CachedDescription is the part of a Describe answer that a cache entry keeps: what a
// listing shows.
type CachedDescription struct {
	Name       string `json:"name"`
	Version    string `json:"version,omitempty"`
	Summary    string `json:"summary,omitempty"`
	Paper      string `json:"paper,omitempty"`
	Complexity string `json:"complexity,omitempty"`
}

// describeCacheVersion is the layout of the cache file; a file of another version is empty.
const describeCacheVersion = 1

type describeCacheFile struct {
	Version int                           `json:"version"`
	Plugins map[string]describeCacheEntry `json:"plugins"`
}

type describeCacheEntry struct {
	Size     int64             `json:"size"`
	ModTime  int64             `json:"mtime_ns"`
	SHA256   string            `json:"sha256"`
	Describe CachedDescription `json:"describe"`
}

var errNoCacheFile = errors.New("no cache file (no user cache directory?)")

// DefaultDescribeCachePath is os.UserCacheDir()/zoo/describe-cache.json.
func DefaultDescribeCachePath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("describe cache: %w", err)
	}
	return filepath.Join(dir, "zoo", "describe-cache.json"), nil
}

// fingerprint is what identifies one version of an executable.
func fingerprint(exe string) (abs string, e describeCacheEntry, err error) {
	abs, err = filepath.Abs(exe)
	if err != nil {
		return "", e, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", e, err
	}
	if !st.Mode().IsRegular() {
		return "", e, fmt.Errorf("%s is not a regular file", abs)
	}
	e.Size, e.ModTime = st.Size(), st.ModTime().UnixNano()
	return abs, e, nil
}

// load reads the cache file; anything wrong with it gives an empty cache.
func (c *DescribeCache) load() describeCacheFile {
	var f describeCacheFile
	var data []byte
	err := errNoCacheFile
	if c != nil && c.Path != "" {
		data, err = os.ReadFile(c.Path)
	}
	if err != nil || json.Unmarshal(data, &f) != nil || f.Version != describeCacheVersion || f.Plugins == nil {
		return describeCacheFile{Version: describeCacheVersion, Plugins: map[string]describeCacheEntry{}}
	}
	return f
}

// Lookup returns the cached description of the executable exe, and false when there is
// none for the file as it is now (a miss, a changed file, a missing or corrupt cache, a
// cache without a Path, or an exe that cannot be read). It never starts the plugin; it reads the whole file to
// check its sha256, and only when size and modification time match.
func (c *DescribeCache) Lookup(exe string) (CachedDescription, bool) {
	abs, now, err := fingerprint(exe)
	if err != nil {
		return CachedDescription{}, false
	}
	e, ok := c.load().Plugins[abs]
	if !ok || e.Size != now.Size || e.ModTime != now.ModTime {
		return CachedDescription{}, false
	}
	if sum, err := fileSHA256(abs); err != nil || sum != e.SHA256 {
		return CachedDescription{}, false
	}
	d := e.Describe
	for _, s := range []string{d.Name, d.Version, d.Summary, d.Paper, d.Complexity} {
		if printable("", s) != nil { // not what Describe, which refuses them, stored
			return CachedDescription{}, false
		}
	}
	return d, true
}

// Store records d as the description of the executable exe as the file is now, and drops
// the entries of executables that no longer exist. It does nothing when the entry is
// already there.
func (c *DescribeCache) Store(exe string, d variant.Description) error {
	abs, e, err := fingerprint(exe)
	if err != nil {
		return fmt.Errorf("describe cache: %w", err)
	}
	if e.SHA256, err = fileSHA256(abs); err != nil {
		return fmt.Errorf("describe cache: %w", err)
	}
	if c == nil || c.Path == "" {
		return fmt.Errorf("describe cache: %w", errNoCacheFile)
	}
	e.Describe = CachedDescription{Name: d.Name, Version: d.Version, Summary: d.Summary, Paper: d.Paper, Complexity: d.Complexity}
	f := c.load()
	if old, ok := f.Plugins[abs]; ok && old == e {
		return nil
	}
	for p := range f.Plugins {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			delete(f.Plugins, p)
		}
	}
	f.Plugins[abs] = e
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("describe cache: %w", err)
	}
	if err := writeFileAtomic(c.Path, append(data, '\n')); err != nil {
		return fmt.Errorf("describe cache: %w", err)
	}
	return nil
}

// writeFileAtomic writes data to a temporary file next to path and renames it over path, so
// that a reader sees the old file or the new one, never a part.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return nil
}
