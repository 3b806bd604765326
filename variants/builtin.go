// Package variants lists the in-tree variants. The zoo binary serves each of them as a plugin
// by re-executing itself; tests may also call them in process.
//
// A new in-tree variant NAME is, in one guess:
//   - variants/NAME/NAME.go: package NAME with New() returning a variant.Variant whose
//     Describe starts from nn.EncoderParams (plus nn.AttentionParams or nn.AttnBiasParam for
//     the usual attention knobs) and carries the one summary, paper, version and cost class of
//     the variant, and whose Build reads nn.EncoderConfigFrom and nn.AttentionOptionsFrom,
//     records nn.Ctx.SetBuildMeta and returns Ctx.Encoder with its attention block (blocks
//     several variants share go in zoo/nn instead). It imports zoo/... only: never another
//     variant, a backend or onnx/;
//   - an entry in the list of Builtin below;
//   - an entry in the repository's registry.yaml: name, plugin: builtin, presets (a tiny one
//     for tests) and no summary or paper (Describe has them);
//   - variants/NAME/testdata/gen_fixtures.py: an independent PyTorch implementation that writes
//     the parity fixtures through variants/internal/fixtures/zoofixtures.py, run with Debian's
//     /usr/bin/python3, with the outputs committed; variants/NAME/parity_test.go runs them with
//     variants/internal/paritytest;
//   - a row in the README's Variants table.
//
// builtin_test.go checks that registry.yaml and Builtin name the same variants, that every
// preset resolves and that no variant links another. A variant outside this repository is a
// plugin instead: `zoo plugin new NAME` scaffolds one.
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
