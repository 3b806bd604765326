package compare

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/zoo-dev/zoo/internal/benchplot"
	"github.com/zoo-dev/zoo/train"
)

// Figure is one plot of the report: a PNG embedded as a data: URL, so the page needs no
// request to show it. Src is the whole src attribute: base64 holds no quote, and as an
// attribute the template leaves it unescaped (as a URL it would write + as &#43;).
type Figure struct {
	ID, Title, Caption string
	Src                template.HTMLAttr
}

// Plots draws the report's figures: the loss curves, time and memory against n (log
// axes, fitted exponents in the legend, as `zoo bench --plot`), and quality against speed.
// It returns the first drawing error.
func Plots(results []Result, s Setup) ([]Figure, error) {
	var figs []Figure
	add := func(id, title, caption string, draw func(w io.Writer) error) error {
		var buf bytes.Buffer
		if err := draw(&buf); err != nil {
			return fmt.Errorf("report: %s: %w", title, err)
		}
		figs = append(figs, Figure{ID: id, Title: title, Caption: caption,
			Src: template.HTMLAttr(`src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(buf.Bytes()) + `"`)})
		return nil
	}
	if err := add("loss", "Loss curves", "Left: training loss of every step, averaged over the seeds: smoothed (solid, a centred moving average) over the raw values (faint), and the held-out loss at each evaluation (dashed, marked). Right: held-out bits per byte at each evaluation.",
		func(w io.Writer) error { return benchplot.RenderPanels(w, lossPanels(results), 1400, 560) }); err != nil {
		return nil, err
	}
	var series []benchplot.Series
	for i, r := range results {
		sr := benchplot.Series{Label: r.Variant, Color: i}
		for _, in := range r.Inference {
			m := -1.0 // not measured: left out
			if in.MemBytes != nil {
				m = float64(*in.MemBytes)
			}
			sr.N, sr.TimeMS, sr.MemBytes = append(sr.N, float64(in.N)), append(sr.TimeMS, in.MS), append(sr.MemBytes, m)
			sr.TimeSD = append(sr.TimeSD, in.MSSD)
		}
		series = append(series, sr)
	}
	if err := add("scaling", "Time and memory against n", "Inference at batch 1 on log-log axes, mean of the timed runs with ± one standard deviation as bars; k is the fitted exponent (time ∝ n^k).",
		func(w io.Writer) error {
			return benchplot.Render(w, series, benchplot.Options{Title: "inference, batch 1", MemLabel: "peak RSS growth (MiB)"})
		}); err != nil {
		return nil, err
	}
	if err := add("quality", "Quality against speed", "Held-out bits per byte (lower is better) against training throughput (left) and inference time at the longest length (right); bars are ± one standard deviation over the seeds (bits per byte, tokens/s) and the timed runs (ms).",
		func(w io.Writer) error { return benchplot.RenderPanels(w, qualityPanels(results, s), 1400, 560) }); err != nil {
		return nil, err
	}
	return figs, nil
}

// meanCurve averages per-seed curves step by step (the steps every seed has).
func meanCurve(curves [][]Point) (x, loss, bpb []float64) {
	if len(curves) == 0 {
		return nil, nil, nil
	}
	type acc struct {
		loss, bpb float64
		n         int
	}
	at := map[int]*acc{}
	var steps []int
	for _, c := range curves {
		for _, p := range c {
			a := at[p.Step]
			if a == nil {
				a = &acc{}
				at[p.Step] = a
				steps = append(steps, p.Step)
			}
			a.loss += p.Loss
			a.bpb += p.BitsPerByte
			a.n++
		}
	}
	slices.Sort(steps)
	for _, k := range steps {
		a := at[k]
		if a.n != len(curves) {
			continue
		}
		x, loss, bpb = append(x, float64(k)), append(loss, a.loss/float64(a.n)), append(bpb, a.bpb/float64(a.n))
	}
	return x, loss, bpb
}

// Smooth is a centred moving average of y over about a twentieth of the points (at least 5),
// narrowed at both ends so that it stays centred there, so that a curve's trend shows through
// the noise of single batches without lagging behind it (an exponential average, as
// TensorBoard's, sits above a falling loss curve by a span's worth of steps).
func Smooth(y []float64) []float64 {
	out := slices.Clone(y)
	h := max(2, len(y)/40)
	prefix := make([]float64, len(y)+1)
	for i, v := range y {
		prefix[i+1] = prefix[i] + v
	}
	for i := range y {
		k := min(h, i, len(y)-1-i)
		out[i] = (prefix[i+k+1] - prefix[i-k]) / float64(2*k+1)
	}
	return out
}

func lossPanels(results []Result) []benchplot.Panel {
	loss := benchplot.Panel{Title: "training loss (mean over seeds; smoothed, raw faint)", XLabel: "step", YLabel: "loss (nats per counted token)"}
	bpb := benchplot.Panel{Title: "held-out bits per byte (mean over seeds)", XLabel: "step", YLabel: "bits per byte"}
	for i, r := range results {
		var trains, evals [][]Point
		for _, sd := range r.Seeds {
			trains, evals = append(trains, sd.Train), append(evals, sd.Eval)
		}
		tx, ty, _ := meanCurve(trains)
		ex, ey, eb := meanCurve(evals)
		loss.Curves = append(loss.Curves,
			benchplot.Curve{X: tx, Y: ty, Color: i, Faint: true},
			benchplot.Curve{Label: r.Variant, X: tx, Y: Smooth(ty), Color: i, Shape: i, EndLabel: true},
			benchplot.Curve{X: ex, Y: ey, Color: i, Dashed: true, Marks: true, Shape: i})
		bpb.Curves = append(bpb.Curves, benchplot.Curve{Label: r.Variant, X: ex, Y: eb, Color: i, Shape: i, Marks: true, EndLabel: true})
	}
	return []benchplot.Panel{loss, bpb}
}

func qualityPanels(results []Result, s Setup) []benchplot.Panel {
	longest := 0
	for _, n := range s.Seqs {
		longest = max(longest, n)
	}
	train := benchplot.Panel{Title: "quality against training speed", XLabel: "training tokens/s", YLabel: "held-out bits per byte", LogX: true}
	infer := benchplot.Panel{Title: fmt.Sprintf("quality against inference time at n=%d", longest),
		XLabel: fmt.Sprintf("inference ms at n=%d, batch 1", longest), YLabel: "held-out bits per byte", LogX: true}
	for i, r := range results {
		train.Curves = append(train.Curves, benchplot.Curve{X: []float64{r.TrainTokensPS}, Y: []float64{r.EvalBPB},
			XErr: []float64{r.TrainTokensPSSD}, YErr: []float64{r.EvalBPBSD}, Color: i, Shape: i, Scatter: true, PointLabels: []string{r.Variant}})
		ms, sd := math.NaN(), 0.0 // a variant that skipped the longest length has no point there
		for _, in := range r.Inference {
			if in.N == longest {
				ms, sd = in.MS, in.MSSD
			}
		}
		infer.Curves = append(infer.Curves, benchplot.Curve{X: []float64{ms}, Y: []float64{r.EvalBPB},
			XErr: []float64{sd}, YErr: []float64{r.EvalBPBSD}, Color: i, Shape: i, Scatter: true, PointLabels: []string{r.Variant}})
	}
	return []benchplot.Panel{train, infer}
}

// WriteHTML writes the report: one self-contained HTML page (inline style, plots as data:
// URLs, no script, no external reference) with the verdict, the setup, the table (each row
// with the changes made to its variant), the notes, the figures and the per-variant configs;
// a partial comparison says so at the top. It returns the first drawing or write error.
func WriteHTML(w io.Writer, results []Result, v train.Verdict, s Setup) error {
	figs, err := Plots(results, s)
	if err != nil {
		return err
	}
	rows := make([][]string, len(results))
	for i, r := range results {
		rows[i] = Cells(r, s.Seqs)
	}
	t := &Table{seqs: s.Seqs}
	changes := make([]string, len(results))
	for i, r := range results {
		changes[i] = strings.Join(r.ConfigChanges, "; ")
		if changes[i] == "" {
			changes[i] = "none"
		}
	}
	data := map[string]any{"Setup": s, "SetupLine": SetupLine(s), "Head": append(t.head(), "CONFIG CHANGES"), "Rows": rows, "Changes": changes,
		"Results": results, "Figures": figs, "Legend": Legend(results, s), "Verdict": v.Text, "TimingDoc": TimingDoc, "Done": len(results)}
	return reportTemplate.Execute(w, data)
}

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>zoo compare: {{range $i, $r := .Results}}{{if $i}}, {{end}}{{$r.Variant}}{{end}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1500px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.45em; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
img { max-width: 100%; border: 1px solid #ddd; }
code, pre { font-size: 0.85em; background: #f6f6f6; } pre { padding: 0.6em; white-space: pre-wrap; }
td code { overflow-wrap: anywhere; }
.setup td:first-child { font-weight: bold; }
.verdict { font-size: 1.05em; background: #f4f8ff; border-left: 4px solid #4a78c2; padding: 0.6em 0.9em; max-width: 75em; }
.partial { background: #fff4e0; border-left: 4px solid #d08a00; padding: 0.6em 0.9em; }
</style>
</head>
<body>
<h1>zoo compare</h1>
{{if .Setup.Partial}}<p class="partial" id="partial"><strong>Partial report:</strong> the comparison was interrupted after {{.Done}} of {{.Setup.Total}} variants; these are the ones that finished.</p>
{{end}}<p class="verdict" id="verdict"><strong>Verdict.</strong> {{.Verdict}}</p>
<p>{{.SetupLine}}</p>
<table class="setup">
<tr><td>command</td><td><code>{{.Setup.Command}}</code></td></tr>
<tr><td>training text</td><td>{{.Setup.Input}}</td></tr>
<tr><td>held-out text</td><td>{{.Setup.Eval}}</td></tr>
<tr><td>budget</td><td>{{.Setup.Steps}} steps × batch {{.Setup.Batch}} × window {{.Setup.Window}} ({{.Setup.Objective}}), the same for every variant, once per seed ({{len .Setup.Seeds}})</td></tr>
<tr><td>machine</td><td>{{.Setup.CPU}} ({{.Setup.Cores}} cores), {{.Setup.Backend}} {{.Setup.Level}}, {{.Setup.Threads}} threads; zoo {{.Setup.Zoo}}, {{.Setup.GoVer}}</td></tr>
</table>
<h2 id="table">Results</h2>
<table id="results">
<thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range $r, $row := .Rows}}<tr>{{range $i, $c := $row}}{{if $i}}<td class="num">{{$c}}</td>{{else}}<td>{{$c}}</td>{{end}}{{end}}<td>{{index $.Changes $r}}</td></tr>
{{end}}</tbody>
</table>
<pre>{{.Legend}}</pre>
{{range .Results}}{{$v := .Variant}}{{range .Notes}}<p>note: {{$v}}: {{.}}</p>
{{end}}{{end}}
{{range .Figures}}<h2 id="{{.ID}}">{{.Title}}</h2>
<figure><img id="fig-{{.ID}}" {{.Src}} alt="{{.Title}}"><figcaption>{{.Caption}}</figcaption></figure>
{{end}}
<h2 id="configs">Configurations</h2>
<table>
<thead><tr><th>variant</th><th>model</th><th>config</th></tr></thead>
<tbody>
{{range .Results}}<tr><td>{{.Variant}}</td><td>{{.Model}}</td><td><code>{{.Config}}</code></td></tr>
{{end}}</tbody>
</table>
<p>{{.TimingDoc}}</p>
<p>{{.Setup.MemDoc}}</p>
</body>
</html>
`))
