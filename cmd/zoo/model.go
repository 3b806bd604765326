package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
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

// flags is what the helpers below read of a command's flags: *cli.Context has it, and tests
// can fake it.
type flags interface {
	String(name string) string
	StringSlice(name string) []string
	Int(name string) int
	Float64(name string) float64
	Uint64(name string) uint64
	Bool(name string) bool
	IsSet(name string) bool
}

// loadRegistry merges the embedded registry, the user's file and --registry FILE.
func loadRegistry(c flags) (*registry.Registry, error) {
	var extra []string
	if p := c.String(flagRegistry.Name); p != "" {
		extra = append(extra, p)
	}
	return zooroot.Registry(extra...)
}

// parseSets turns repeated --set KEY=VALUE flags into a layer of string values.
func parseSets(sets []string) (map[string]string, error) {
	out := map[string]string{}
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

// loadOptions turns the model flags into the library's options: --preset, --set, --seed
// (explicit --seed 0 on an .onnx file is refused like any other), --registry, --weights,
// --tokenizer, --backend and the plugin host of the command's session.
func loadOptions(ctx context.Context, c flags) (zooroot.LoadOptions, error) {
	sets, err := parseSets(c.StringSlice(flagSet.Name))
	if err != nil {
		return zooroot.LoadOptions{}, badInput(err)
	}
	opts := zooroot.LoadOptions{Preset: c.String(flagPreset.Name), Set: sets, Seed: c.Uint64(flagSeed.Name),
		Weights: c.String(flagWeights.Name), Tokenizer: c.String(flagTokenizer.Name), Backend: c.String(flagBackend.Name)}
	if p := c.String(flagRegistry.Name); p != "" {
		opts.Registries = []string{p}
	}
	s, err := sessionOf(ctx)
	if err != nil {
		return opts, err
	}
	opts.Plugins = s
	return opts, nil
}

// loadModel resolves ref (a variant, or an .onnx file), builds or imports its graph and loads
// --weights into it.
func loadModel(ctx context.Context, c flags, ref string) (*zooroot.Model, error) {
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return nil, err
	}
	return loadWith(ctx, c, ref, opts)
}

// loadWith is loadModel with options the caller has adjusted.
func loadWith(ctx context.Context, c flags, ref string, opts zooroot.LoadOptions) (*zooroot.Model, error) {
	if zooroot.IsONNXPath(ref) && c.IsSet(flagSeed.Name) && opts.Seed == 0 {
		return nil, badInputf("--seed does not apply to %s: an ONNX file's hyperparameters and weights are fixed (--preset, --set and --seed shape a variant)", ref)
	}
	return zooroot.Load(ctx, ref, opts)
}

// resolveVariant finds ref ("name", "alias" or "name.preset") and resolves its config with the
// command's --preset and --set.
func resolveVariant(ctx context.Context, c flags, ref string) (*zooroot.Spec, error) {
	opts, err := loadOptions(ctx, c)
	if err != nil {
		return nil, err
	}
	return zooroot.Resolve(ctx, ref, opts, 0)
}

// compileModel compiles m's graph on the backend --backend chooses, with opts. A bad
// --backend, or an opts.Precision the backend has no path for here, is bad input (exit 2), a
// failed compile a failed job (exit 1).
func compileModel(m *zooroot.Model, opts backends.Options) (backends.Choice, backends.Program, error) {
	return m.CompileWith(opts)
}

// The flags of the model-loading layer. The flag is --weights everywhere except on export,
// where --weights names the state_dict export writes and --from-weights is the one that loads.
var (
	flagWeights = &cli.StringFlag{Name: "weights", Usage: "load the parameters and buffers, by PyTorch state_dict name, from `FILE`.safetensors " +
		"(written by zoo export --weights, zoo train or PyTorch's safetensors; F16, BF16 and F64 are converted to F32); default: random weights from --seed"}
	flagFromWeights = &cli.StringFlag{Name: "from-weights", Usage: "load the parameters and buffers, by PyTorch state_dict name, from `FILE`.safetensors before exporting " +
		"(default: random weights from --seed)"}
	flagTokenizer = &cli.StringFlag{Name: "tokenizer", Aliases: []string{"t"},
		Usage: "tokenizer `FILE` (tokenizer.json, SentencePiece .model or vocab.txt); default: for an .onnx file the one next to it, else bytes"}
	flagFeed = &cli.StringSliceFlag{Name: "feed", Usage: "feed input NAME the role ROLE, `NAME=ROLE` (repeatable; roles: ids, mask (1 = keep), padding (1 = padding), types, positions)"}
)

// planFeeds is zooroot.PlanFeeds with --feed's name where the library says
// EncoderOptions.Feeds (in the reasons and the error).
func planFeeds(g *graph.Graph, overrides []string) (*zooroot.FeedPlan, error) {
	p, err := zooroot.PlanFeeds(g, overrides)
	if err != nil {
		return nil, err
	}
	c := *p
	c.Feeds = cliFeeds(p.Feeds)
	return &c, nil
}

// cliFeeds returns feeds with their reasons naming flags, for reports.
func cliFeeds(feeds []zooroot.Feed) []zooroot.Feed {
	out := make([]zooroot.Feed, len(feeds))
	for i, f := range feeds {
		f.Why = flagNames(f.Why)
		out[i] = f
	}
	return out
}
