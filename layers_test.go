package zoo_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/zoo-dev/zoo"

// deps lists the in-module packages that the packages matching pattern link (tests excluded),
// as go list reports them, keyed by the importing package.
func deps(t *testing.T, dir string, patterns ...string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for pkg, ds := range allDeps(t, dir, patterns...) {
		for _, d := range ds {
			if strings.HasPrefix(d, module+"/") {
				got[pkg] = append(got[pkg], strings.TrimPrefix(d, module+"/"))
			}
		}
	}
	return got
}

// allDeps lists every package (in the module or not, the standard library included) that the
// packages matching pattern link (tests excluded), keyed by the importing package.
func allDeps(t *testing.T, dir string, patterns ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-deps=false", "-f", `{{.ImportPath}}:{{join .Deps " "}}`}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", patterns, err, stderr)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, list, _ := strings.Cut(line, ":")
		got[pkg] = strings.Fields(list)
	}
	return got
}

// TestLayers checks that dependencies point one way: the library core links nothing of the
// ONNX codec, the backends, the plugin host, the variants or the CLI; a variant and the plugin
// SDK link no backend (so a third-party plugin binary carries none); the backends and the codec
// link no plugin layer; the serving package links none of them.
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	rules := []struct {
		pattern string
		skip    []string // packages of the pattern the rule does not cover, with the reason in a comment
		never   []string
	}{
		{pattern: "./zoo/...", never: []string{"onnx", "backends", "plugin", "variants", "cmd"}},
		{pattern: "./internal/...", never: []string{"onnx", "backends", "plugin", "variants", "cmd"}},
		// ONNX's node-test runner (test support: onnx's and backends/cuda's tests) runs the
		// tests on a backend; no program links it.
		{pattern: "./onnx/...", never: []string{"backends", "plugin", "variants", "cmd"}, skip: []string{"onnx/nodetests"}},
		{pattern: "./backends/...", never: []string{"onnx", "plugin", "variants", "cmd"},
			// The shared backend tests build their models with the variants, as a user would.
			skip: []string{"backends/backendtest"}},
		// The SDK a plugin links: no backend. Its conformance kit runs models on the CPU backend
		// and plugintest fakes plugins for the host's tests; neither is linked into a plugin binary.
		{pattern: "./plugin/...", never: []string{"backends", "variants", "cmd"},
			skip: []string{"plugin/conformance", "plugin/plugintest"}},
		// A variant never imports a backend. Their parity helpers (test-only) run the CPU backend.
		{pattern: "./variants/...", never: []string{"backends", "cmd"}, skip: []string{"variants/internal/paritytest"}},
		// The serving package depends on its Encoder interface: a program that serves its own
		// model links none of zoo's backends, variants, codec, plugin host or CLI.
		{pattern: "./serve/...", never: []string{"backends", "variants", "onnx", "plugin", "cmd"}},
		// Training is a library: the CLI calls it, never the other way round.
		{pattern: "./train/...", never: []string{"cmd"}},
	}
	for _, r := range rules {
		for pkg, ds := range deps(t, ".", r.pattern) {
			rel := strings.TrimPrefix(pkg, module+"/")
			if slices.Contains(r.skip, rel) {
				continue
			}
			for _, d := range ds {
				for _, n := range r.never {
					if d == n || strings.HasPrefix(d, n+"/") {
						t.Errorf("%s links %s: %s must not depend on %s/", rel, d, r.pattern, n)
					}
				}
			}
		}
	}
}

// cliModule is the CLI framework only cmd/ may link.
const cliModule = "github.com/urfave/cli/v2"

// TestOnlyCmdLinksCLI checks that no package of the module outside cmd/ links the CLI
// framework: the library never reads flags.
func TestOnlyCmdLinksCLI(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	all := allDeps(t, ".", "./...")
	if len(all) == 0 {
		t.Fatal("go list ./... listed no packages")
	}
	for pkg, ds := range all {
		if strings.HasPrefix(pkg, module+"/cmd/") {
			continue
		}
		for _, d := range ds {
			if d == cliModule || strings.HasPrefix(d, cliModule+"/") {
				t.Errorf("%s links %s: only cmd/ may depend on the CLI framework", strings.TrimPrefix(pkg, module+"/"), d)
			}
		}
	}
}

// TestThirdPartyPluginLinksNoBackend checks the example third-party plugin (its own module) the
// way a plugin author would build it.
func TestThirdPartyPluginLinksNoBackend(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	for pkg, ds := range deps(t, filepath.Join("examples", "talkingheads"), ".") {
		for _, d := range ds {
			if strings.HasPrefix(d, "backends") || strings.HasPrefix(d, "cmd/") {
				t.Errorf("%s links %s: a plugin binary must link no backend and no CLI", pkg, d)
			}
		}
	}
}
