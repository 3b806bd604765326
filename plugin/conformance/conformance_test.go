package conformance_test

import (
	"os"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/plugin/conformance"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

func TestMain(m *testing.M) {
	plugintest.MaybeServe()
	os.Exit(m.Run())
}

func TestGoodVariantInProcess(t *testing.T) {
	r := conformance.RunVariant(plugintest.Variant(), conformance.Options{Seed: 3})
	if !r.OK() {
		t.Fatalf("a good variant fails:\n%s", r)
	}
	t.Logf("\n%s", r)
}

// The kit runs on real processes: a good plugin passes, a nondeterministic one and a crashing
// one fail with the reason.
func TestPluginProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode string
		ok   bool
		want string
	}{
		{plugintest.ModeOK, true, "conforms"},
		{plugintest.ModeNondeterminst, false, "two builds with seed 0 differ"},
		{plugintest.ModeCrashBuild, false, "crashed during Build"},
		{plugintest.ModeStdout, false, "not a zoo variant plugin"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Setenv(plugintest.ModeEnv, c.mode)
			r := conformance.RunPath(exe, conformance.Options{})
			if r.OK() != c.ok || !strings.Contains(r.String(), c.want) {
				t.Errorf("ok=%v, want %v and %q:\n%s", r.OK(), c.ok, c.want, r)
			}
		})
	}
}
