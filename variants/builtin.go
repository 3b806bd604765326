// Package variants lists the in-tree variants. The zoo binary serves each of them as a plugin
// by re-executing itself; tests may also call them in process.
package variants

import (
	"github.com/zoo-dev/zoo/variants/alibi"
	"github.com/zoo-dev/zoo/variants/gqa"
	"github.com/zoo-dev/zoo/variants/linear"
	"github.com/zoo-dev/zoo/variants/linformer"
	"github.com/zoo-dev/zoo/variants/nystrom"
	"github.com/zoo-dev/zoo/variants/performer"
	"github.com/zoo-dev/zoo/variants/relbias"
	"github.com/zoo-dev/zoo/variants/rope"
	"github.com/zoo-dev/zoo/variants/sparse"
	"github.com/zoo-dev/zoo/variants/vanilla"
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
