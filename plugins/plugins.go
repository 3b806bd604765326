// Package plugins lists the in-tree variants. The zoo binary serves each of them as a plugin
// by re-executing itself; tests may also call them in process.
package plugins

import (
	"github.com/zoo-dev/zoo/plugins/alibi"
	"github.com/zoo-dev/zoo/plugins/gqa"
	"github.com/zoo-dev/zoo/plugins/linear"
	"github.com/zoo-dev/zoo/plugins/linformer"
	"github.com/zoo-dev/zoo/plugins/nystrom"
	"github.com/zoo-dev/zoo/plugins/performer"
	"github.com/zoo-dev/zoo/plugins/relbias"
	"github.com/zoo-dev/zoo/plugins/rope"
	"github.com/zoo-dev/zoo/plugins/sparse"
	"github.com/zoo-dev/zoo/plugins/vanilla"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Builtin returns every in-tree variant, keyed by name.
func Builtin() map[string]variant.Variant {
	out := map[string]variant.Variant{}
	for _, v := range []variant.Variant{vanilla.New(), nystrom.New(), performer.New(), linear.New(), alibi.New(), gqa.New(), linformer.New(), rope.New(), relbias.New(), sparse.New()} {
		out[v.Describe().Name] = v
	}
	return out
}
