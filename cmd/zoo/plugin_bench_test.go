package main

import (
	"context"
	"os"
	"testing"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// BenchmarkPluginBoundary measures what the plugin boundary costs for vanilla: the direct Go
// call (the pre-plugin path), the in-process gRPC server (reattach mode), a warm plugin
// process (Build only) and a cold one (start, handshake, Describe, Build, kill: what one
// `zoo run` pays). Run: go test -run '^$' -bench PluginBoundary -benchtime 10x ./cmd/zoo
func BenchmarkPluginBoundary(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	self := func(name string) (string, []string, error) { return exe, []string{servePluginArg, name}, nil }
	spec := plugin.Spec{Name: "vanilla", Builtin: true}
	for _, preset := range []struct {
		name string
		over map[string]any
	}{
		{"tiny", map[string]any{"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}},
		{"base", nil},
	} {
		cfg, err := variant.Resolve(vanilla.New().Describe(), preset.over)
		if err != nil {
			b.Fatal(err)
		}
		var bytes int64
		b.Run(preset.name+"/direct", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := vanilla.New().Build(context.Background(), cfg, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(preset.name+"/inprocess-grpc", func(b *testing.B) {
			c, err := plugin.InProcess(context.Background(), vanilla.New(), plugin.HostOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := c.BuildStats(context.Background(), cfg, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(preset.name+"/process-warm", func(b *testing.B) {
			h := plugin.NewHost(plugin.HostOptions{Self: self})
			defer h.Close()
			c, err := h.Client(context.Background(), spec)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var st plugin.BuildStats
			for i := 0; i < b.N; i++ {
				if _, st, err = c.BuildStats(context.Background(), cfg, 0); err != nil {
					b.Fatal(err)
				}
			}
			bytes = st.Bytes
			b.SetBytes(bytes)
		})
		b.Run(preset.name+"/process-cold", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				h := plugin.NewHost(plugin.HostOptions{Self: self})
				v, err := h.Client(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := v.Build(context.Background(), cfg, 0); err != nil {
					b.Fatal(err)
				}
				h.Close()
			}
		})
		b.Run(preset.name+"/process-start-describe-kill", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				h := plugin.NewHost(plugin.HostOptions{Self: self})
				if _, err := h.Client(context.Background(), spec); err != nil {
					b.Fatal(err)
				}
				h.Close()
			}
		})
	}
}
