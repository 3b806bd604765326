package backends

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
)

type fakeBackend struct {
	name string
	p    Probe
}

func (f fakeBackend) Name() string { return f.name }
func (f fakeBackend) Probe() Probe { return f.p }
func (f fakeBackend) Compile(*graph.Graph, Options) (Program, error) {
	return nil, &UnsupportedOpError{Backend: f.name, Op: "Any"}
}

// withBackends replaces the registry for one test and isolates the environment.
func withBackends(t *testing.T, bs ...Backend) string {
	t.Helper()
	saved := registry
	registry = map[string]Backend{}
	for _, b := range bs {
		Register(b)
	}
	t.Cleanup(func() { registry = saved })
	dir := t.TempDir()
	t.Setenv("ZOO_BACKEND", "")
	t.Setenv(ConfigEnv, filepath.Join(dir, "config.yaml"))
	savedHost := hostname
	hostname = func() (string, error) { return "h1.example.com", nil }
	t.Cleanup(func() { hostname = savedHost })
	return filepath.Join(dir, "config.yaml")
}

var (
	cpuOK     = fakeBackend{"cpu", Probe{Available: true, Priority: 10}}
	gpuOK     = fakeBackend{"cuda", Probe{Available: true, Priority: 100}}
	gpuAbsent = fakeBackend{"cuda", Probe{Available: false, Reason: "libcuda.so.1 not found: no NVIDIA driver installed", Priority: 100}}
)

func writeConfig(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSelectAutomatic(t *testing.T) {
	withBackends(t, cpuOK, gpuOK)
	c, err := Select("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend.Name() != "cuda" || c.Source != "auto" {
		t.Fatalf("chose %s from %s, want cuda from auto", c.Backend.Name(), c.Source)
	}
	if want := "chosen automatically: cuda is available and ranks above cpu"; c.Why != want {
		t.Errorf("Why = %q, want %q", c.Why, want)
	}
}

func TestSelectAutomaticExplainsUnavailable(t *testing.T) {
	withBackends(t, cpuOK, gpuAbsent)
	c, err := Select("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend.Name() != "cpu" {
		t.Fatalf("chose %s, want cpu", c.Backend.Name())
	}
	for _, want := range []string{"cpu is available and is the only available backend", "cuda is unavailable: libcuda.so.1 not found"} {
		if !strings.Contains(c.Why, want) {
			t.Errorf("Why = %q, want it to contain %q", c.Why, want)
		}
	}
}

func TestSelectRequestedUnavailableIsAnError(t *testing.T) {
	withBackends(t, cpuOK, gpuAbsent)
	for _, tc := range []struct{ flag, env, want string }{
		{"cuda", "", "backend cuda (--backend) is not available on this machine: libcuda.so.1 not found"},
		{"", "cuda", "backend cuda (ZOO_BACKEND) is not available"},
		{"tpu", "", `unknown backend "tpu" (--backend); known backends: cpu, cuda, or auto`},
	} {
		t.Setenv("ZOO_BACKEND", tc.env)
		_, err := Select(tc.flag)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Select(%q) with ZOO_BACKEND=%q: err = %v, want %q", tc.flag, tc.env, err, tc.want)
		}
	}
}

func TestSelectLayers(t *testing.T) {
	path := withBackends(t, cpuOK, gpuOK)
	writeConfig(t, path, "backend: cpu\nhosts:\n  other:\n    backend: cuda\n")

	c, err := Select("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend.Name() != "cpu" || c.Source != "config" || c.Why != "from "+displayPath(path) {
		t.Fatalf("config default: got %s (%s, %q)", c.Backend.Name(), c.Source, c.Why)
	}

	// A per-host entry (matched by the host's first label) beats the file's default.
	writeConfig(t, path, "backend: cuda\nhosts:\n  h1:\n    backend: cpu\n")
	c, err = Select("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend.Name() != "cpu" || !strings.HasSuffix(c.Why, "(host h1)") {
		t.Fatalf("host entry: got %s (%q)", c.Backend.Name(), c.Why)
	}

	// ZOO_BACKEND beats the config file, and --backend beats both.
	t.Setenv("ZOO_BACKEND", "cuda")
	c, err = Select("")
	if err != nil || c.Backend.Name() != "cuda" || c.Why != "from ZOO_BACKEND" {
		t.Fatalf("env: got %v (%q), err %v", c.Backend, c.Why, err)
	}
	c, err = Select("cpu")
	if err != nil || c.Backend.Name() != "cpu" || c.Why != "requested with --backend" {
		t.Fatalf("flag: got %v (%q), err %v", c.Backend, c.Why, err)
	}

	// "auto" in a layer asks for the automatic choice.
	c, err = Select("auto")
	if err != nil || c.Backend.Name() != "cuda" || c.Source != "auto" {
		t.Fatalf("auto: got %v (%q), err %v", c.Backend, c.Why, err)
	}
}

func TestSelectConfigErrorsNameTheFile(t *testing.T) {
	path := withBackends(t, cpuOK, gpuAbsent)
	for _, tc := range []struct{ body, want string }{
		{"backend: cuda\n", "(from " + displayPath(path) + ") is not available on this machine"},
		{"backend: tpu\n", `unknown backend "tpu" (from ` + displayPath(path) + ")"},
		{"backnd: cpu\n", "config " + path + ": "},
		{"hosts:\n  h1: {}\n", "config " + path + ": hosts.h1 has no backend"},
		{"backend: [cpu\n", "config " + path + ": "},
	} {
		writeConfig(t, path, tc.body)
		_, err := Select("")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %q: err = %v, want it to contain %q", tc.body, err, tc.want)
		}
	}
	// An empty file is an empty config.
	writeConfig(t, path, "")
	if c, err := Select(""); err != nil || c.Backend.Name() != "cpu" {
		t.Errorf("empty config: got %v, err %v", c.Backend, err)
	}
}

func TestSelectNothingAvailable(t *testing.T) {
	withBackends(t, gpuAbsent)
	_, err := Select("")
	if err == nil || !strings.Contains(err.Error(), "no backend is available on this machine (cuda is unavailable: libcuda.so.1") {
		t.Fatalf("err = %v", err)
	}
}
