package train

import (
	"context"
	"strings"

	zoo "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Load loads the variant ref names for training with objective (MLM or CLM): zoo.Load with
// LoadOptions.Training set (its dropout sites are graph inputs, fed per step from
// Config.Seed) and, for CLM, the variant's causal hyperparameter turned on, after
// opts.Configure when that is set. A variant without one, LoadOptions.Set causal=false and
// an .onnx file (whose parameters zoo does not know by name) are *zoo.InputError, as are
// zoo.Load's.
func Load(ctx context.Context, ref, objective string, opts zoo.LoadOptions) (*zoo.Model, error) {
	if zoo.IsONNXPath(ref) {
		return nil, inputErrf("", "%s is an ONNX file; training builds a variant of the registry, whose parameters it knows by name", ref)
	}
	if objective != MLM && objective != CLM {
		return nil, inputErrf(optObjective, "%s %q: want mlm or clm", optObjective, objective)
	}
	opts.Training = true
	if objective == CLM {
		opts.Configure = causalHook(opts.Configure, opts.Set, func(d variant.Description) error {
			return inputErrf(optObjective, "%s clm: %s has no causal hyperparameter (its attention cannot hide later positions, so every position would see its target); use %s mlm",
				optObjective, d.Name, optObjective)
		}, func(v string) error {
			return inputErrf(optLoadSet, "%s clm needs causal=true; drop %s causal=%v", optObjective, optLoadSet, v)
		})
	}
	return zoo.Load(ctx, ref, opts)
}

// causalHook returns the LoadOptions.Configure that runs then (when set) and turns causal on,
// with the errors noCausal (the variant has no causal hyperparameter) and setOff (set turns
// it off, to the value given).
func causalHook(then func(variant.Description, variant.Config) error, set map[string]string,
	noCausal func(variant.Description) error, setOff func(value string) error) func(variant.Description, variant.Config) error {
	return func(d variant.Description, cfg variant.Config) error {
		if then != nil {
			if err := then(d, cfg); err != nil {
				return err
			}
		}
		if _, ok := d.Param("causal"); !ok {
			return noCausal(d)
		}
		if v, ok := set["causal"]; ok && strings.TrimSpace(v) != "true" {
			return setOff(v)
		}
		cfg["causal"] = true
		return nil
	}
}

// causal reports whether m was built with causal attention: a variant's causal
// hyperparameter, or an .onnx file's config metadata as zoo export writes it.
func causal(m *zoo.Model) bool {
	if m.FromFile() {
		return strings.Contains(m.Graph().Meta["config"], `"causal":true`)
	}
	return m.Config().Bool("causal")
}
