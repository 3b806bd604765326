package backends

import (
	"strings"
	"testing"
)

// FuzzParseConfig feeds arbitrary bytes to the config.yaml parser: it must return a config or
// one error naming the file, never panic.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"backend: cpu\n",
		"backend: auto\nhosts:\n  gpu1: {backend: cuda}\n  laptop:\n    backend: cpu\n",
		"hosts: []\n",
		"backend: [1, 2]\n",
		"unknown: 1\n",
		"",
		"\t\x00",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("config.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "config.yaml") {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("nil config without an error")
		}
		cfg.BackendFor("somehost")
	})
}
