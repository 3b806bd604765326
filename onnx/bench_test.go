package onnx_test

import (
	"context"

	"sync"
	"testing"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/variant"
)

var base struct {
	once sync.Once
	g    *graph.Graph
	data []byte
	err  error
}

// vanillaBase builds the vanilla variant at its default (base) hyperparameters, about 87 MB of
// float32 initializers, and exports it once.
func vanillaBase(b *testing.B) (*graph.Graph, []byte) {
	b.Helper()
	base.once.Do(func() {
		v := vanilla.New()
		cfg, err := variant.Resolve(v.Describe(), nil)
		if err != nil {
			base.err = err
			return
		}
		if base.g, base.err = v.Build(context.Background(), cfg, 0); base.err != nil {
			return
		}
		base.data, base.err = onnx.Export(base.g, onnx.ExportOptions{})
	})
	if base.err != nil {
		b.Fatal(base.err)
	}
	return base.g, base.data
}

// BenchmarkExport measures onnx.Export of the vanilla base model (MB/s of ONNX written).
// Run: go test -run '^$' -bench 'Export|Import' ./onnx
func BenchmarkExport(b *testing.B) {
	g, data := vanillaBase(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := onnx.Export(g, onnx.ExportOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkImport measures onnx.Import of the vanilla base model (MB/s of ONNX read).
func BenchmarkImport(b *testing.B) {
	_, data := vanillaBase(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := onnx.Import(data); err != nil {
			b.Fatal(err)
		}
	}
}
