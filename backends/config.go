package backends

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/zoo-dev/zoo/internal/env"
)

// ConfigEnv names an environment variable that, when set, replaces the default config file
// path (os.UserConfigDir()/zoo/config.yaml). Tests and scripts use it; users rarely need it.
const ConfigEnv = env.Config

// Config is the user's per-machine configuration file, for example:
//
//	backend: cpu          # the default on every machine that shares this file
//	hosts:
//	  gpu-box-1:
//	    backend: cuda     # this host only
//
// The file is parsed strictly: an unknown key is an error that names the file.
type Config struct {
	// Backend is the backend for hosts without an entry of their own ("" or "auto": choose
	// automatically).
	Backend string `yaml:"backend"`
	// Hosts holds per-host settings keyed by host name (as os.Hostname reports it, or its
	// first label).
	Hosts map[string]HostConfig `yaml:"hosts"`
}

// HostConfig is one host's entry in Config.Hosts.
type HostConfig struct {
	// Backend is the backend for this host ("auto": choose automatically).
	Backend string `yaml:"backend"`
}

// ConfigPath returns the path of the user's config file: $ZOO_CONFIG when set, else
// os.UserConfigDir()/zoo/config.yaml.
func ConfigPath() (string, error) {
	if p, _ := env.Get(ConfigEnv); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("locate the zoo config file: %w", err)
	}
	return filepath.Join(dir, "zoo", "config.yaml"), nil
}

// LoadConfig reads and strictly parses the config file at path. A missing file is not an
// error: it returns (nil, nil). Errors name the file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	return ParseConfig(path, data)
}

// ParseConfig strictly parses config file contents; path is only used in error messages.
// An empty file is an empty config.
func ParseConfig(path string, data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w (expected keys: backend, hosts: {HOSTNAME: {backend: NAME}})", path, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: holds more than one YAML document", path)
	}
	for h, hc := range c.Hosts {
		if strings.TrimSpace(h) == "" {
			return nil, fmt.Errorf("config %s: hosts has an entry with an empty host name", path)
		}
		if hc.Backend == "" {
			return nil, fmt.Errorf("config %s: hosts.%s has no backend (write backend: NAME, or auto)", path, h)
		}
	}
	return &c, nil
}

// BackendFor returns the backend the config names for host and the entry that named it:
// "host NAME" for a per-host entry, "default" for the top-level key, or "" when the config
// says nothing for this host. A host entry matches the full host name first, then its first
// label ("gpu1" for "gpu1.example.com").
func (c *Config) BackendFor(host string) (name, entry string) {
	if c == nil {
		return "", ""
	}
	keys := []string{host}
	if short, _, ok := strings.Cut(host, "."); ok && short != "" {
		keys = append(keys, short)
	}
	for _, k := range keys {
		if hc, ok := c.Hosts[k]; ok {
			return hc.Backend, "host " + k
		}
	}
	if c.Backend != "" {
		return c.Backend, "default"
	}
	return "", ""
}
