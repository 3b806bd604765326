package plugin_test

import (
	"context"
	"testing"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// BenchmarkStream measures the Build stream alone: a plugin process sends 64 MiB (already in
// memory) in 1 MiB chunks with its CRC-32C; the host receives, reassembles and checks it.
// Run: go test -run '^$' -bench Stream ./zoo/plugin
func BenchmarkStream(b *testing.B) {
	spec, _ := self(b, plugintest.ModeBlob)
	h := plugin.NewHost(plugin.HostOptions{})
	defer h.Close()
	c, err := h.Client(context.Background(), spec)
	if err != nil {
		b.Fatal(err)
	}
	cfg, _ := variantConfig(c)
	if _, _, err := c.BuildONNX(context.Background(), cfg, 0, 0); err != nil { // warm up
		b.Fatal(err)
	}
	b.SetBytes(64 << 20)
	b.ResetTimer()
	var transfer float64
	for i := 0; i < b.N; i++ {
		_, st, err := c.BuildONNX(context.Background(), cfg, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		transfer += st.Transfer.Seconds()
	}
	b.ReportMetric(float64(b.N)*64*(1<<20)/1e6/transfer, "MB/s-header-to-trailer")
}

// BenchmarkStartDescribeKill measures a cold plugin: exec, handshake, Describe, Kill.
func BenchmarkStartDescribeKill(b *testing.B) {
	spec, _ := self(b, plugintest.ModeOK)
	for i := 0; i < b.N; i++ {
		h := plugin.NewHost(plugin.HostOptions{})
		if _, err := h.Client(context.Background(), spec); err != nil {
			b.Fatal(err)
		}
		h.Close()
	}
}
