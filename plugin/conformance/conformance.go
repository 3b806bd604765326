// Package conformance is the plugin conformance kit behind `zoo plugin test PATH`: it starts a
// plugin executable (or serves a Go variant in process through the same gRPC server) and
// checks the handshake, Describe, Build at two configs, the validity of the graphs, the
// determinism of the weights for a seed, and a forward pass on the CPU backend.
//
// Plugin authors can run it from their own tests:
//
//	func TestConformance(t *testing.T) {
//		r := conformance.RunVariant(myvariant.New(), conformance.Options{})
//		if !r.OK() {
//			t.Fatal(r)
//		}
//	}
package conformance

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/zoo-dev/zoo/backends"
	_ "github.com/zoo-dev/zoo/backends/cpu" // the forward pass runs on the CPU backend
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// Options tune a conformance run. The zero value checks two small configs with seed 1.
type Options struct {
	// Sets overrides hyperparameters of both configs (like --set), for variants whose
	// constraints the kit's small configs do not meet.
	Sets map[string]any
	// Seed is the seed of the determinism check (the other seed is Seed+1).
	Seed uint64
	// StartTimeout and BuildTimeout bound the plugin (0: the host's defaults).
	StartTimeout, BuildTimeout time.Duration
	// Logs receives the plugin's logs (nil: discarded).
	Logs io.Writer
	// Context, when set, bounds the whole run: when it ends, the plugin is stopped and the
	// remaining checks fail (nil: context.Background()).
	Context context.Context
}

func (o Options) ctx() context.Context {
	if o.Context == nil {
		return context.Background()
	}
	return o.Context
}

// Check is the outcome of one check.
type Check struct {
	Name     string        `json:"name"`
	Err      string        `json:"error,omitempty"`
	Detail   string        `json:"detail,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// OK reports whether the check passed.
func (c Check) OK() bool { return c.Err == "" }

// Report holds every check of a run, in order.
type Report struct {
	Plugin string  `json:"plugin"`
	Checks []Check `json:"checks"`
}

// OK reports whether every check passed.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK() {
			return false
		}
	}
	return len(r.Checks) > 0
}

// String renders the report, one line per check.
func (r Report) String() string {
	var b strings.Builder
	r.Write(&b)
	return b.String()
}

// Write renders the report on w: "ok  name (time): detail" or "FAIL name: error".
func (r Report) Write(w io.Writer) {
	for _, c := range r.Checks {
		if c.OK() {
			fmt.Fprintf(w, "ok    %-22s %9s  %s\n", c.Name, c.Duration.Round(10*time.Microsecond), c.Detail)
		} else {
			fmt.Fprintf(w, "FAIL  %-22s %9s  %s\n", c.Name, c.Duration.Round(10*time.Microsecond), c.Err)
		}
	}
	passed := 0
	for _, c := range r.Checks {
		if c.OK() {
			passed++
		}
	}
	verdict := "conforms"
	if !r.OK() {
		verdict = "does NOT conform"
	}
	fmt.Fprintf(w, "%s %s: %d of %d checks passed\n", r.Plugin, verdict, passed, len(r.Checks))
}

// RunPath checks the plugin executable at path, in a process of its own.
func RunPath(path string, opts Options) Report {
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	h := plugin.NewHost(hostOptions(opts))
	defer h.Close()
	k := &kit{opts: opts, report: Report{Plugin: path}}
	k.step("handshake", func() (string, error) {
		c, err := h.Client(opts.ctx(), plugin.Spec{Name: name, Path: path})
		if err != nil {
			return "", err
		}
		k.client = c
		r := c.DescribeResponse()
		return fmt.Sprintf("pid %d, protocol %d.%d, sdk %q", c.Pid(), plugin.ProtocolVersion, r.GetProtocolMinor(), r.GetSdkVersion()), nil
	})
	if k.client != nil {
		k.run()
	}
	return k.report
}

// RunVariant checks a Go variant served in this process through the plugin gRPC server.
func RunVariant(v variant.Variant, opts Options) Report {
	k := &kit{opts: opts, report: Report{Plugin: v.Describe().Name + " (in process)"}}
	k.step("handshake", func() (string, error) {
		c, err := plugin.InProcess(opts.ctx(), v, hostOptions(opts))
		if err != nil {
			return "", err
		}
		k.client = c
		return "in process, reattached", nil
	})
	if k.client != nil {
		defer k.client.Close()
		k.run()
	}
	return k.report
}

func hostOptions(opts Options) plugin.HostOptions {
	return plugin.HostOptions{StartTimeout: opts.StartTimeout, BuildTimeout: opts.BuildTimeout, Logs: opts.Logs, Verbose: opts.Logs != nil}
}

type kit struct {
	opts   Options
	report Report
	client *plugin.Client
}

// step runs one check and records it; it reports whether it passed.
func (k *kit) step(name string, f func() (string, error)) bool {
	t := time.Now()
	detail, err := f()
	c := Check{Name: name, Detail: detail, Duration: time.Since(t)}
	if err != nil {
		c.Err = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	k.report.Checks = append(k.report.Checks, c)
	return err == nil
}

// small and other are the kit's two configs, applied to the hyperparameters a variant has.
var (
	small = map[string]any{"d_model": int64(32), "heads": int64(2), "layers": int64(1), "d_ff": int64(64), "max_len": int64(64)}
	other = map[string]any{"d_model": int64(48), "heads": int64(4), "layers": int64(2), "d_ff": int64(96), "max_len": int64(64)}
)

func (k *kit) run() {
	d := k.client.Describe()
	var cfgA, cfgB variant.Config
	if !k.step("describe", func() (string, error) {
		if err := checkDescription(d); err != nil {
			return "", err
		}
		var err error
		if _, err = variant.Resolve(d); err != nil {
			return "", fmt.Errorf("the defaults do not resolve: %w", err)
		}
		if cfgA, err = variant.Resolve(d, only(d, small), k.opts.Sets); err != nil {
			return "", fmt.Errorf("the kit's small config: %w (override with --set)", err)
		}
		if cfgB, err = variant.Resolve(d, only(d, other), k.opts.Sets); err != nil {
			return "", fmt.Errorf("the kit's second config: %w (override with --set)", err)
		}
		return fmt.Sprintf("%s %s, %d hyperparameters, %s", d.Name, d.Version, len(d.Params), d.Complexity), nil
	}) {
		return
	}
	graphs := make([]*graph.Graph, 2)
	for i, cfg := range []variant.Config{cfgA, cfgB} {
		ok := k.step(fmt.Sprintf("build config %c", 'A'+i), func() (string, error) {
			g, st, err := k.client.BuildStats(k.opts.ctx(), cfg, k.opts.Seed)
			if err != nil {
				return "", err
			}
			graphs[i] = g
			return fmt.Sprintf("%s: %d bytes in %d chunks, %d nodes, %d parameters", cfg.JSON(), st.Bytes, st.Chunks, len(g.Nodes), g.ParamCount()), nil
		})
		if !ok && i == 0 {
			return
		}
		if ok {
			k.step(fmt.Sprintf("graph valid %c", 'A'+i), func() (string, error) { return checkGraph(d, cfg, graphs[i]) })
		}
	}
	if graphs[1] != nil && graphs[0].ParamCount() == graphs[1].ParamCount() {
		k.step("configs matter", func() (string, error) {
			return "", errors.New("configs A and B give the same parameter count: are the hyperparameters ignored?")
		})
	}
	k.step("determinism", func() (string, error) {
		a, _, err := k.client.BuildONNX(k.opts.ctx(), cfgA, k.opts.Seed, 0)
		if err != nil {
			return "", err
		}
		b, _, err := k.client.BuildONNX(k.opts.ctx(), cfgA, k.opts.Seed, 0)
		if err != nil {
			return "", err
		}
		if sha256.Sum256(a) != sha256.Sum256(b) {
			return "", fmt.Errorf("two builds with seed %d differ: weights must come from the seed alone (use zoo/initrand, not math/rand or time)", k.opts.Seed)
		}
		c, _, err := k.client.BuildONNX(k.opts.ctx(), cfgA, k.opts.Seed+1, 0)
		if err != nil {
			return "", err
		}
		if sha256.Sum256(a) == sha256.Sum256(c) {
			return "", fmt.Errorf("seeds %d and %d give the same model: the seed is ignored", k.opts.Seed, k.opts.Seed+1)
		}
		return fmt.Sprintf("seed %d twice: identical %d bytes; seed %d differs", k.opts.Seed, len(a), k.opts.Seed+1), nil
	})
	k.step("rejects unknown keys", func() (string, error) {
		bad := variant.Config{}
		for key, v := range cfgA {
			bad[key] = v
		}
		bad["no_such_hyperparameter"] = int64(1)
		_, _, err := k.client.BuildONNX(k.opts.ctx(), bad, k.opts.Seed, 0)
		var pe *plugin.Error
		if err == nil {
			return "", errors.New("Build accepted a config with an unknown hyperparameter (validate with variant.Resolve, as plugin.Serve does)")
		}
		if !errors.As(err, &pe) || pe.Kind != plugin.ErrConfig {
			return "", fmt.Errorf("want a config error (INVALID_ARGUMENT), got: %w", err)
		}
		return "INVALID_ARGUMENT: " + pe.Msg, nil
	})
	k.step("forward (cpu)", func() (string, error) { return forward(d, cfgA, graphs[0]) })
}

// only keeps the entries of m that d has, with d's kinds.
func only(d variant.Description, m map[string]any) map[string]any {
	out := map[string]any{}
	for key, v := range m {
		if p, ok := d.Param(key); ok && p.Kind == variant.KindInt {
			out[key] = v
		}
	}
	return out
}

func checkDescription(d variant.Description) error {
	if d.Name == "" || strings.ToLower(d.Name) != d.Name || strings.ContainsAny(d.Name, " .") {
		return fmt.Errorf("name %q: want a lower-case name without spaces or dots", d.Name)
	}
	if d.Version == "" {
		return errors.New("no version")
	}
	if d.Summary == "" {
		return errors.New("no summary")
	}
	for _, p := range d.Params {
		if p.Doc == "" {
			return fmt.Errorf("hyperparameter %s has no doc", p.Name)
		}
	}
	return nil
}

// checkGraph checks the contract and the output widths against the config.
func checkGraph(d variant.Description, cfg variant.Config, g *graph.Graph) (string, error) {
	if g == nil {
		return "", errors.New("the rebuild failed")
	}
	if err := plugin.CheckContract(d, g); err != nil {
		return "", err
	}
	for _, o := range g.Outputs {
		var want string
		switch o.Name {
		case variant.OutputHidden:
			want = "d_model"
		case variant.OutputLogits:
			want = "vocab"
		default:
			continue
		}
		if _, ok := cfg[want]; !ok {
			continue
		}
		last := o.Shape[len(o.Shape)-1]
		if last.Param == "" && last.Size != int64(cfg.Int(want)) {
			return "", fmt.Errorf("output %s is %v, want last dimension %s=%d", o.Name, o.Shape, want, cfg.Int(want))
		}
	}
	return fmt.Sprintf("inputs %d, outputs hidden and logits, opset %d", len(g.Inputs), g.Opset), nil
}

// forward runs a padded batch of two sequences on the CPU backend and checks the outputs'
// shapes and that valid positions are finite.
func forward(d variant.Description, cfg variant.Config, g *graph.Graph) (string, error) {
	cpu, ok := backends.Lookup("cpu")
	if !ok {
		return "", errors.New("the cpu backend is not registered")
	}
	prog, err := cpu.Compile(g, backends.Options{Threads: 1})
	if err != nil {
		return "", fmt.Errorf("compile on cpu: %w", err)
	}
	defer prog.Close()
	const batch, n, valid2 = 2, 16, 10
	vocab := cfg.Int("vocab")
	if vocab < 2 {
		vocab = 257
	}
	ids := make([]int64, batch*n)
	pad := make([]bool, batch*n)
	for i := range ids {
		ids[i] = int64(1 + (i*7)%(vocab-1))
		if i >= n && i-n >= valid2 && d.Caps.KeyPadding {
			ids[i], pad[i] = 0, true
		}
	}
	tokens, err := tensor.FromInt64(ids, batch, n)
	if err != nil {
		return "", err
	}
	inputs := map[string]*tensor.Tensor{variant.InputTokens: tokens}
	if d.Caps.KeyPadding {
		mask, err := tensor.FromBool(pad, batch, n)
		if err != nil {
			return "", err
		}
		inputs[variant.InputKeyPadding] = mask
	}
	t := time.Now()
	outs, err := prog.Run(context.Background(), inputs)
	if err != nil {
		return "", fmt.Errorf("run on cpu: %w", err)
	}
	for _, name := range []string{variant.OutputHidden, variant.OutputLogits} {
		x := outs[name]
		if x == nil {
			return "", fmt.Errorf("no output %s", name)
		}
		if len(x.Shape) != 3 || x.Shape[0] != batch || x.Shape[1] != n {
			return "", fmt.Errorf("output %s has shape %v, want (%d, %d, ·)", name, x.Shape, batch, n)
		}
		w := x.Shape[2]
		for b := 0; b < batch; b++ {
			for i := 0; i < n; i++ {
				if pad[b*n+i] {
					continue
				}
				for j := 0; j < w; j++ {
					if v := x.F32[(b*n+i)*w+j]; math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						return "", fmt.Errorf("output %s is %v at valid position (%d, %d, %d)", name, v, b, i, j)
					}
				}
			}
		}
	}
	return fmt.Sprintf("batch (%d, %d) with padding: hidden %v, logits %v, finite, %s", batch, n, outs[variant.OutputHidden].Shape, outs[variant.OutputLogits].Shape, time.Since(t).Round(time.Microsecond)), nil
}
