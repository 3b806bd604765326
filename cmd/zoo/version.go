package main

import (
	"runtime/debug"
	"strings"
)

// version is this binary's version, as --version prints it (without the Go version) and as
// exports record it in producer_version.
var version = buildVersion()

// buildVersion describes this binary from its build information: the module version
// ("(devel)" when built from a checkout), then the VCS revision, its time and whether the
// tree had uncommitted changes, e.g. "(devel) rev 1a2b3c4d5e6f 2026-12-01T18:00:00Z, dirty".
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module support)"
	}
	return describeBuild(bi)
}

func describeBuild(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	rev := s["vcs.revision"]
	if rev == "" && v != "(devel)" {
		return v // a tagged module version (go install ...@v1.2.3) names the source by itself
	}
	if rev == "" {
		return v + " (no VCS revision recorded: built outside a checkout or with -buildvcs=false)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	parts := []string{v, "rev " + rev}
	if t := s["vcs.time"]; t != "" {
		parts = append(parts, t)
	}
	out := strings.Join(parts, " ")
	if s["vcs.modified"] == "true" {
		out += ", dirty"
	}
	return out
}
