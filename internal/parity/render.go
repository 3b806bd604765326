package parity

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// RenderOptions say what the report compares and in which form.
type RenderOptions struct {
	// Got and Want name the runtime under test and the reference ("zoo cpu", "onnxruntime 1.30").
	Got, Want string
	// JSON selects the machine-readable form (a Report object) instead of text.
	JSON bool
}

// Report is the JSON form of a parity run.
type Report struct {
	Got     string   `json:"got"`
	Want    string   `json:"want"`
	Rule    string   `json:"rule"`
	Pass    bool     `json:"pass"`
	Failed  []string `json:"failed_outputs"`
	Outputs []Result `json:"outputs"`
}

// NewReport collects results into a Report.
func NewReport(results []Result, opts RenderOptions) Report {
	rep := Report{Got: opts.Got, Want: opts.Want, Rule: Rule, Pass: AllPass(results), Failed: []string{}, Outputs: results}
	if rep.Outputs == nil {
		rep.Outputs = []Result{}
	}
	for _, r := range results {
		if !r.Pass {
			rep.Failed = append(rep.Failed, r.Name)
		}
	}
	return rep
}

// Render writes results as a Polygraphy-style text report, or as indented JSON (a Report)
// when opts.JSON is set. It returns the first write error.
func Render(w io.Writer, results []Result, opts RenderOptions) error {
	if opts.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(NewReport(results, opts))
	}
	p := &printer{w: w}
	p.printf("Comparing %s against %s\n", orDefault(opts.Got, "got"), orDefault(opts.Want, "reference"))
	p.printf("  Rule: %s\n", Rule)
	var names, failed []string
	for _, r := range results {
		names = append(names, fmt.Sprintf("'%s'", r.Name))
		if !r.Pass {
			failed = append(failed, fmt.Sprintf("'%s'", r.Name))
		}
		renderOne(p, r)
	}
	if len(results) == 0 {
		p.printf("  FAILED | No outputs were compared\n")
	} else if len(failed) == 0 {
		p.printf("  PASSED | All outputs matched | Outputs: [%s]\n", strings.Join(names, ", "))
	} else {
		p.printf("  FAILED | Mismatched outputs: [%s]\n", strings.Join(failed, ", "))
	}
	return p.err
}

func renderOne(p *printer, r Result) {
	p.printf("  Comparing Output: '%s' (dtype=%s, shape=%s) with '%s' (dtype=%s, shape=%s)\n",
		r.Name, r.GotDType, tensor.ShapeString(r.GotShape), r.Name, r.WantDType, tensor.ShapeString(r.WantShape))
	if r.Err != "" {
		p.printf("    FAILED | Output: '%s' | %s\n", r.Name, r.Err)
		return
	}
	p.printf("    Tolerance: [abs=%.5g, rel=%.5g] | Checking elemwise error | %d elements compared", r.Atol, r.Rtol, r.Compared)
	if r.Masked > 0 {
		p.printf(", %d elements at padded positions skipped", r.Masked)
	}
	p.printf("\n")
	p.printf("    got  | Stats: mean=%.5g, std-dev=%.5g, min=%.5g, max=%.5g\n", r.Got.Mean, r.Got.StdDev, r.Got.Min, r.Got.Max)
	p.printf("    want | Stats: mean=%.5g, std-dev=%.5g, min=%.5g, max=%.5g\n", r.Want.Mean, r.Want.StdDev, r.Want.Min, r.Want.Max)
	p.printf("    Error Metrics: %s\n", r.Name)
	if r.NaNMismatches > 0 {
		p.printf("      NaN/Inf mismatches: %d (fail at any tolerance)\n", r.NaNMismatches)
	}
	p.printf("      Minimum Required Tolerance: elemwise error | [abs=%.5g] OR [rel=%.5g] | with rel=%.5g: abs=%.5g | with abs=%.5g: rel=%.5g\n",
		r.MaxAbs, r.MaxRel, r.Rtol, r.MinAtol, r.Atol, r.MinRtol)
	p.printf("      Absolute Difference | Stats: mean=%.5g, max=%.5g at %s\n", r.MeanAbs, r.MaxAbs, at(r.MaxAbsAt))
	p.printf("      Relative Difference | Stats: mean=%.5g, max=%.5g at %s\n", r.MeanRel, r.MaxRel, at(r.MaxRelAt))
	if r.Pass {
		p.printf("    PASSED | Output: '%s' | Difference is within tolerance (rel=%.5g, abs=%.5g)\n", r.Name, r.Rtol, r.Atol)
		return
	}
	p.printf("    FAILED | Output: '%s' | Difference exceeds tolerance (rel=%.5g, abs=%.5g): %d of %d elements, first at %s\n",
		r.Name, r.Rtol, r.Atol, r.Failed, r.Compared, at(r.FirstFailAt))
}

func at(idx []int) string {
	if idx == nil {
		return "-"
	}
	return tensor.ShapeString(idx)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
