package plugin_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// TestRequirePinned: a host that requires pins refuses an unpinned executable before running
// it, naming its digest; a pinned one starts. ZOO_REQUIRE_PINNED=1 sets the option.
func TestRequirePinned(t *testing.T) {
	spec, pidFile := self(t, plugintest.ModeOK)
	spec.Source = "reg.yaml:3"
	h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Minute, RequirePinned: true})
	defer h.Close()
	sum, err := plugin.FileSHA256(spec.Path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Client(context.Background(), spec)
	var pe *plugin.Error
	if !errors.As(err, &pe) || pe.Kind != plugin.ErrNotPinned || !pe.BadInput() ||
		!strings.Contains(err.Error(), "is not pinned by sha256, and unpinned plugins are refused (ZOO_REQUIRE_PINNED=1 or --require-pinned); if you trust this file, pin it in reg.yaml:3: sha256: \""+sum+"\"") {
		t.Fatalf("unpinned: %v", err)
	}
	if _, err := plugintest.WaitFile(pidFile, 100*time.Millisecond); err == nil {
		t.Error("the unpinned plugin ran")
	}
	spec.SHA256 = sum
	c, err := h.Client(context.Background(), spec)
	if err != nil {
		t.Fatalf("pinned: %v", err)
	}
	c.Close()

	t.Setenv(plugin.RequirePinnedEnv, "1")
	o, err := plugin.HostOptions{}.FromEnv()
	if err != nil || !o.RequirePinned {
		t.Errorf("FromEnv with %s=1: %+v, %v", plugin.RequirePinnedEnv, o, err)
	}
}
