// Package variant defines what an encoder variant is to zoo: a description with a typed
// hyperparameter schema, and a Build step that turns a validated config and a seed into a
// graph. In-tree variants implement Variant directly; the plugin host wraps remote plugins in
// the same interface, so callers never know which one they hold.
//
// # Training graphs
//
// A training graph differs from the inference graph by a build option, not by graph surgery:
// the trainer resolves the config as usual and passes WithTraining(cfg) to Build, which sets
// the reserved key TrainingKey ("@training"; users cannot set it, Resolve refuses it, and the
// plugin server takes it off before resolving and puts it back). A variant reads it through
// Config.Training (nn.EncoderConfigFrom does). Without it nothing changes: inference graphs,
// exports, fusions and speed are what they were, whatever the dropout hyperparameter says.
//
// With it, dropout (nn.DropoutParam, default 0.1, the seed's) applies where the seed applies
// it, to each sub-layer's output before its residual add. Each site is a Mul by a graph input
// named DropoutInput(site) ("dropout:layers.0.self_attn", "dropout:layers.0.ffn", …) of shape
// (batch, seq, d_model), float32, that the trainer fills with 0 or 1/(1 − p) per element, from
// its seed and the step (lmdata.DropoutFeeds), and the graph's metadata MetaDropout holds p.
// So a training graph is standard ONNX with no random op, every backend runs it, autodiff
// sees a plain Mul, and a resumed run draws the same masks as an uninterrupted one. A
// variant that ignores TrainingKey (a third-party plugin built against an older SDK) trains
// without dropout.
package variant

import (
	"context"

	"github.com/zoo-dev/zoo/zoo/graph"
)

// Kind is a hyperparameter's type.
type Kind string

// Hyperparameter kinds.
const (
	KindInt    Kind = "int"
	KindFloat  Kind = "float"
	KindBool   Kind = "bool"
	KindString Kind = "string"
)

// Param documents one hyperparameter. Default holds int64, float64, bool or string to match
// Kind. Choices, when set, restricts a string parameter. Min, when non-nil, is the smallest
// legal value of a numeric parameter.
type Param struct {
	Name    string
	Kind    Kind
	Default any
	Doc     string
	Choices []string
	Min     *float64
}

// Capabilities says what inputs a variant's graphs accept.
type Capabilities struct {
	// MaxLenParam names the hyperparameter that bounds the sequence length ("" when unbounded).
	MaxLenParam string
	// KeyPadding is true when the graph takes a key_padding_mask input.
	KeyPadding bool
}

// Description is what a variant says about itself.
type Description struct {
	Name    string
	Version string
	Summary string
	Paper   string
	// Complexity is the attention cost class in n, e.g. "O(n²)" or "O(n)".
	Complexity string
	Params     []Param
	Caps       Capabilities
}

// Param returns the named parameter's schema entry.
func (d Description) Param(name string) (Param, bool) {
	for _, p := range d.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Variant builds encoder graphs.
type Variant interface {
	// Describe returns the variant's name, documentation and hyperparameter schema.
	Describe() Description
	// Build returns the graph for cfg (already validated against the schema by Resolve) with
	// weights initialised deterministically from seed. Bad combinations of values (heads not
	// dividing d_model) are errors naming the parameters. A long build stops early with
	// ctx.Err() once ctx is done (Ctrl-C, the host's build timeout).
	Build(ctx context.Context, cfg Config, seed uint64) (*graph.Graph, error)
}
