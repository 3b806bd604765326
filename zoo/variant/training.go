package variant

import "strings"

// TrainingKey is the reserved config key that asks Build for a training graph. It is not a
// hyperparameter: Resolve refuses it in user layers (--set, presets, registry defaults), and
// the trainer adds it to a resolved config with WithTraining. See the package doc.
const TrainingKey = "@training"

// DropoutInputPrefix begins the names of a training graph's dropout inputs (DropoutInput).
const DropoutInputPrefix = "dropout:"

// MetaDropout is the graph metadata key holding a training graph's dropout rate.
const MetaDropout = "dropout"

// DropoutInput is the name of the training graph's input that drops out the sub-layer output
// at site (a module path such as "layers.0.self_attn" or "layers.0.ffn"): "dropout:" + site.
func DropoutInput(site string) string { return DropoutInputPrefix + site }

// IsDropoutInput reports whether a graph input name is a dropout input.
func IsDropoutInput(name string) bool { return strings.HasPrefix(name, DropoutInputPrefix) }

// Training reports whether c asks for a training build (WithTraining).
func (c Config) Training() bool { return c.Bool(TrainingKey) }

// WithTraining returns a copy of c, a resolved config, that asks Build for a training graph.
func WithTraining(c Config) Config {
	out := make(Config, len(c)+1)
	for k, v := range c {
		out[k] = v
	}
	out[TrainingKey] = true
	return out
}

// SplitTraining removes TrainingKey from layer (a config received over the plugin wire) and
// returns whether it asked for a training build, so that the rest resolves strictly.
func SplitTraining(layer map[string]any) (map[string]any, bool) {
	v, ok := layer[TrainingKey]
	if !ok {
		return layer, false
	}
	rest := make(map[string]any, len(layer))
	for k, x := range layer {
		if k != TrainingKey {
			rest[k] = x
		}
	}
	b, _ := v.(bool)
	return rest, b
}
