package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Flags shared by every verb that builds a model.
var (
	flagPreset   = &cli.StringFlag{Name: "preset", Usage: "preset of the variant (also NAME.PRESET), e.g. tiny or base"}
	flagSet      = &cli.StringSliceFlag{Name: "set", Usage: "override a hyperparameter, `KEY=VALUE` (repeatable)"}
	flagSeed     = &cli.Uint64Flag{Name: "seed", Value: 0, Usage: "seed of the deterministic weight initialisation"}
	flagRegistry = &cli.StringFlag{Name: "registry", Usage: "extra registry `FILE` whose entries add to or override the built-in ones"}
	flagJSON     = &cli.BoolFlag{Name: "json", Usage: "print the result as JSON on stdout"}
	flagBackend  = &cli.StringFlag{Name: "backend", Usage: "backend `NAME` to run on (see zoo backends); default: ZOO_BACKEND, then the fastest available"}
)

// modelFlags are the flags of a verb that builds a model: variantFlags and --weights.
func modelFlags() []cli.Flag { return append(variantFlags(), flagWeights) }

// variantFlags shape a variant's config and initial weights.
func variantFlags() []cli.Flag { return []cli.Flag{flagPreset, flagSet, flagSeed, flagRegistry} }

// loadRegistry merges the embedded registry, the user's file and --registry FILE.
func loadRegistry(c *cli.Context) (*registry.Registry, error) {
	base, err := registry.Parse("registry.yaml (built in)", zooroot.RegistryYAML)
	if err != nil {
		return nil, fmt.Errorf("built-in registry: %w", err)
	}
	layers := []*registry.Registry{base}
	user, err := registry.LoadUser()
	if err != nil {
		return nil, badInput(err)
	}
	if user != nil {
		layers = append(layers, user)
	}
	if path := c.String(flagRegistry.Name); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, badInputf("read registry: %w", err)
		}
		extra, err := registry.Parse(path, data)
		if err != nil {
			return nil, badInput(err)
		}
		layers = append(layers, extra)
	}
	return registry.Merge(layers...), nil
}

// model is a resolved, built model: where it came from, its config and its graph.
type model struct {
	Name     string // variant name, or the ONNX file path
	Preset   string
	Desc     variant.Description
	Config   variant.Config
	Seed     uint64
	Graph    *graph.Graph
	FromFile bool
	// WeightsFile is the state_dict loaded over the initial weights ("" for none).
	WeightsFile string
}

// parseSets turns repeated --set KEY=VALUE flags into a layer of string values.
func parseSets(sets []string) (map[string]any, error) {
	out := map[string]any{}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want KEY=VALUE", s)
		}
		out[k] = v
	}
	return out, nil
}

// resolveVariant finds ref ("name", "alias" or "name.preset") and returns the variant, its
// registry entry, the preset in force and the complete config.
func resolveVariant(c *cli.Context, ref string) (variant.Variant, registry.Entry, string, variant.Config, error) {
	return resolveVariantVocab(c, ref, 0)
}

// resolveVariantVocab is resolveVariant with vocab > 0 the size of a tokenizer's vocabulary:
// it sets the variant's vocab hyperparameter (between the preset and --set, so an explicit
// --set vocab=N still wins), where the variant has one.
func resolveVariantVocab(c *cli.Context, ref string, vocab int) (variant.Variant, registry.Entry, string, variant.Config, error) {
	reg, err := loadRegistry(c)
	if err != nil {
		return nil, registry.Entry{}, "", nil, err
	}
	entry, preset, err := reg.Lookup(ref)
	if err != nil {
		return nil, entry, "", nil, badInput(err)
	}
	if p := c.String(flagPreset.Name); p != "" {
		if preset != "" && preset != p {
			return nil, entry, "", nil, badInputf("model %q names preset %q but --preset says %q; use one", ref, preset, p)
		}
		preset = p
	}
	v, err := variantFor(c.Context, entry)
	if err != nil {
		return nil, entry, "", nil, err
	}
	layers := []map[string]any{entry.Defaults}
	if preset != "" {
		values, ok := entry.Presets[preset]
		if !ok {
			return nil, entry, "", nil, badInputf("variant %s has no preset %q (presets: %s)", entry.Name, preset, strings.Join(entry.PresetNames(), ", "))
		}
		layers = append(layers, values)
	}
	if vocab > 0 {
		for _, p := range v.Describe().Params {
			if p.Name == vocabParam {
				layers = append(layers, map[string]any{vocabParam: int64(vocab)})
			}
		}
	}
	sets, err := parseSets(c.StringSlice(flagSet.Name))
	if err != nil {
		return nil, entry, "", nil, badInput(err)
	}
	layers = append(layers, sets)
	cfg, err := variant.Resolve(v.Describe(), layers...)
	if err != nil {
		return nil, entry, "", nil, badInput(err)
	}
	return v, entry, preset, cfg, nil
}

// vocabParam is the hyperparameter a tokenizer's vocabulary size sets.
const vocabParam = "vocab"

// loadModel resolves ref (a variant, or an .onnx file), builds or imports its graph and
// loads the state_dict the command names (--weights, or --from-weights on export) into it.
func loadModel(c *cli.Context, ref string) (*model, error) { return loadModelWith(c, ref, 0, nil) }

// loadModelVocab is loadModel with a tokenizer's vocabulary size for a variant (see
// resolveVariantVocab); 0 keeps the variant's own.
func loadModelVocab(c *cli.Context, ref string, vocab int) (*model, error) {
	return loadModelWith(c, ref, vocab, nil)
}

// configHook adjusts a variant's resolved config before the build (e.g. clm turns causal
// on); its error is returned as it is.
type configHook func(d variant.Description, cfg variant.Config) error

// loadModelWith is loadModelVocab with hook (nil for none) applied to a variant's config; an
// ONNX file's config is fixed, and the hook does not run for it.
func loadModelWith(c *cli.Context, ref string, vocab int, hook configHook) (*model, error) {
	var m *model
	var err error
	if isONNXPath(ref) {
		if err := rejectVariantFlags(c, ref); err != nil {
			return nil, err
		}
		m, err = loadONNXModel(ref)
	} else {
		v, entry, preset, cfg, rerr := resolveVariantVocab(c, ref, vocab)
		if rerr != nil {
			return nil, rerr
		}
		if hook != nil {
			if err := hook(v.Describe(), cfg); err != nil {
				return nil, err
			}
		}
		m, err = buildModel(c.Context, v, entry, preset, cfg, c.Uint64(flagSeed.Name))
	}
	if err != nil {
		return nil, err
	}
	if err := applyWeights(c, m); err != nil {
		return nil, err
	}
	return m, nil
}

// buildModel builds a resolved variant's graph; a build error is bad input (the config).
func buildModel(ctx context.Context, v variant.Variant, entry registry.Entry, preset string, cfg variant.Config, seed uint64) (*model, error) {
	g, err := v.Build(ctx, cfg, seed)
	if err != nil {
		return nil, badInput(err)
	}
	return &model{Name: entry.Name, Preset: preset, Desc: v.Describe(), Config: cfg, Seed: seed, Graph: g}, nil
}

// displayName is "vanilla" or "vanilla.tiny".
func (m *model) displayName() string {
	if m.Preset != "" {
		return m.Name + "." + m.Preset
	}
	return m.Name
}

// compileModel compiles m's graph on the backend --backend chooses. Its errors are the
// command's: a bad --backend, or an opts.Precision the backend has no path for here
// (checkPrecision), is bad input (exit 2), a failed compile a failed job (exit 1).
func compileModel(c *cli.Context, m *model, opts backends.Options) (backends.Choice, backends.Program, error) {
	choice, err := backends.Select(c.String(flagBackend.Name))
	if err != nil {
		return backends.Choice{}, nil, badInput(err)
	}
	if err := checkPrecision(choice, opts.Precision); err != nil {
		return backends.Choice{}, nil, err
	}
	prog, err := choice.Backend.Compile(m.Graph, opts)
	if err != nil {
		return backends.Choice{}, nil, failed(fmt.Errorf("compile %s on %s: %w", m.displayName(), choice.Backend.Name(), err))
	}
	return choice, prog, nil
}
