package backends

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// Choice is the outcome of backend selection: the backend, its probe, and why it was chosen.
type Choice struct {
	Backend Backend
	Probe   Probe
	Why     string
}

// Select picks the backend to run on. The order is: requested (from --backend), the
// ZOO_BACKEND environment variable, then the available backend with the highest priority.
// A requested backend that is unknown or unavailable is an error, never a silent fallback.
func Select(requested string) (Choice, error) {
	source := "--backend"
	if requested == "" {
		if env := os.Getenv("ZOO_BACKEND"); env != "" {
			requested, source = env, "ZOO_BACKEND"
		}
	}
	if requested != "" && requested != "auto" {
		b, ok := Lookup(requested)
		if !ok {
			return Choice{}, fmt.Errorf("unknown backend %q (from %s); available: %s", requested, source, strings.Join(names(), ", "))
		}
		p := b.Probe()
		if !p.Available {
			return Choice{}, fmt.Errorf("backend %s (from %s) is not available on this machine: %s", requested, source, p.Reason)
		}
		return Choice{Backend: b, Probe: p, Why: "requested by " + source}, nil
	}
	var best *Choice
	for _, b := range All() {
		p := b.Probe()
		if !p.Available {
			continue
		}
		if best == nil || p.Priority > best.Probe.Priority {
			best = &Choice{Backend: b, Probe: p}
		}
	}
	if best == nil {
		return Choice{}, fmt.Errorf("no backend is available on this machine (registered: %s)", strings.Join(names(), ", "))
	}
	best.Why = "fastest available backend on this machine"
	return *best, nil
}

func names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
