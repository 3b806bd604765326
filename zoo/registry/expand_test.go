package registry

import (
	"runtime"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/hostile"
)

// TestAliasFanout: one anchored preset of k keys named by k presets expands to k² values;
// with k = 3,000 (a 105 KB file) zoo list took 1.4 GB and 49 s. Parse now refuses it from the
// node tree, in one line naming the alias, allocating about the file's own size.
func TestAliasFanout(t *testing.T) {
	data := hostile.AliasFanout(3000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse("fan.yaml", data)
	runtime.ReadMemStats(&after)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "fan.yaml:") ||
		!strings.Contains(err.Error(), "YAML aliases expand the registry (") || !strings.Contains(err.Error(), "*p repeats the anchor &p") {
		t.Fatalf("err = %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 200*uint64(len(data)) {
		t.Errorf("refusing a %d-byte file allocated %d MB", len(data), alloc>>20)
	}
	// A fan-out within the limit parses, and its presets hold the anchor's values.
	r, err := Parse("fan.yaml", hostile.AliasFanout(50))
	if err != nil {
		t.Fatal(err)
	}
	e, preset, err := r.Lookup("fan.p50")
	if err != nil || preset != "p50" || len(e.Presets["p50"]) != 50 || e.Presets["p50"]["k49"] != int64(49) {
		t.Fatalf("fan.p50: %v %v", e.Presets["p50"], err)
	}
}
