package backends

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/internal/env"
)

// Choice is the outcome of backend selection: the backend, its probe, and why it was chosen.
type Choice struct {
	Backend Backend
	Probe   Probe
	// Why explains the choice in one line, e.g. "requested with --backend",
	// "from ZOO_BACKEND", "from /home/u/.config/zoo/config.yaml (host h1)" or
	// "chosen automatically: cuda is available and ranks above cpu".
	Why string
	// Source is the layer that decided: "flag", "env", "config" or "auto".
	Source string
}

// hostname is os.Hostname, replaceable in tests.
var hostname = os.Hostname

// Select picks the backend to run on. The order is: requested (from --backend), the
// ZOO_BACKEND environment variable, the user's config file (see ConfigPath; a per-host entry
// wins over the file's default), then the available backend with the highest priority.
// "auto" at any layer asks for the automatic choice. A backend named by a layer that is
// unknown or unavailable is an error naming that layer, never a silent fallback; so is a
// malformed config file.
func Select(requested string) (Choice, error) {
	requested = strings.TrimSpace(requested)
	if requested != "" {
		return pick(requested, "flag", "requested with --backend", "--backend")
	}
	if v, _ := env.Get(env.Backend); v != "" {
		return pick(v, "env", "from "+env.Backend, env.Backend)
	}
	path, err := ConfigPath()
	if err != nil {
		return Choice{}, err
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		return Choice{}, err
	}
	host, _ := hostname()
	if name, entry := cfg.BackendFor(host); name != "" {
		why := "from " + displayPath(path)
		if entry != "default" {
			why += " (" + entry + ")"
		}
		return pick(name, "config", why, why)
	}
	return auto()
}

// pick returns the named backend if it is registered and available; "auto" defers to the
// automatic choice.
func pick(name, source, why, from string) (Choice, error) {
	if name == "auto" {
		c, err := auto()
		if err == nil {
			c.Why += "; " + from + " says auto"
		}
		return c, err
	}
	b, ok := Lookup(name)
	if !ok {
		return Choice{}, fmt.Errorf("unknown backend %q (%s); known backends: %s, or auto", name, from, strings.Join(names(), ", "))
	}
	p := b.Probe()
	if !p.Available {
		return Choice{}, fmt.Errorf("backend %s (%s) is not available on this machine: %s; choose another with --backend, ZOO_BACKEND or the config file", name, from, p.Reason)
	}
	return Choice{Backend: b, Probe: p, Why: why, Source: source}, nil
}

// auto picks the available backend with the highest priority and explains the choice,
// naming the higher-ranked backends that are unavailable and why.
func auto() (Choice, error) {
	type cand struct {
		b Backend
		p Probe
	}
	var all []cand
	for _, b := range All() {
		all = append(all, cand{b, b.Probe()})
	}
	// Highest priority first; ties by name for determinism.
	sort.SliceStable(all, func(i, j int) bool { return all[i].p.Priority > all[j].p.Priority })
	var best *cand
	var skipped []string
	for i := range all {
		c := &all[i]
		if !c.p.Available {
			if best == nil {
				skipped = append(skipped, fmt.Sprintf("%s is unavailable: %s", c.b.Name(), c.p.Reason))
			}
			continue
		}
		if best == nil {
			best = c
		}
	}
	if best == nil {
		return Choice{}, fmt.Errorf("no backend is available on this machine (%s)", strings.Join(skipped, "; "))
	}
	var below []string
	for _, c := range all {
		if c.p.Available && c.b.Name() != best.b.Name() {
			below = append(below, c.b.Name())
		}
	}
	why := "chosen automatically: " + best.b.Name() + " is available"
	switch {
	case len(below) > 0:
		why += " and ranks above " + strings.Join(below, ", ")
	default:
		why += " and is the only available backend"
	}
	if len(skipped) > 0 {
		why += " (" + strings.Join(skipped, "; ") + ")"
	}
	return Choice{Backend: best.b, Probe: best.p, Why: why, Source: "auto"}, nil
}

// displayPath shortens a path under the home directory to ~/...
func displayPath(p string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "" && strings.HasPrefix(p, home+string(os.PathSeparator)) {
		return "~" + p[len(home):]
	}
	return p
}

func names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
