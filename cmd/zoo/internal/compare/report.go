package compare

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"

	"github.com/zoo-dev/zoo/internal/benchplot"
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
	if err := add("loss", "Loss curves", "Training loss of every step (solid) and held-out loss at each evaluation (dashed, marked); right: held-out bits per byte.",
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
		}
		series = append(series, sr)
	}
	if err := add("scaling", "Time and memory against n", "Inference at batch 1 on log-log axes; k is the fitted exponent (time ∝ n^k).",
		func(w io.Writer) error {
			return benchplot.Render(w, series, benchplot.Options{Title: "inference, batch 1", MemLabel: "peak RSS growth (MiB)"})
		}); err != nil {
		return nil, err
	}
	if err := add("quality", "Quality against speed", "Held-out bits per byte (lower is better) against training throughput (left) and inference time at the longest length (right).",
		func(w io.Writer) error { return benchplot.RenderPanels(w, qualityPanels(results, s), 1400, 560) }); err != nil {
		return nil, err
	}
	return figs, nil
}

func lossPanels(results []Result) []benchplot.Panel {
	loss := benchplot.Panel{Title: "loss", XLabel: "step", YLabel: "loss (nats per counted token)"}
	bpb := benchplot.Panel{Title: "held-out bits per byte", XLabel: "step", YLabel: "bits per byte"}
	for i, r := range results {
		var tx, ty, ex, ey, eb []float64
		for _, p := range r.Train {
			tx, ty = append(tx, float64(p.Step)), append(ty, p.Loss)
		}
		for _, p := range r.Eval {
			ex, ey, eb = append(ex, float64(p.Step)), append(ey, p.Loss), append(eb, p.BitsPerByte)
		}
		loss.Curves = append(loss.Curves,
			benchplot.Curve{Label: r.Variant + " training", X: tx, Y: ty, Color: i},
			benchplot.Curve{Label: r.Variant + " held-out", X: ex, Y: ey, Color: i, Dashed: true, Marks: true})
		bpb.Curves = append(bpb.Curves, benchplot.Curve{Label: r.Variant, X: ex, Y: eb, Color: i, Marks: true})
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
			Color: i, Scatter: true, PointLabels: []string{r.Variant}})
		ms := math.NaN() // a variant that skipped the longest length has no point there
		for _, in := range r.Inference {
			if in.N == longest {
				ms = in.MS
			}
		}
		infer.Curves = append(infer.Curves, benchplot.Curve{X: []float64{ms}, Y: []float64{r.EvalBPB},
			Color: i, Scatter: true, PointLabels: []string{r.Variant}})
	}
	return []benchplot.Panel{train, infer}
}

// WriteHTML writes the report: one self-contained HTML page (inline style, plots as data:
// URLs, no script, no external reference) with the setup, the table, the notes, the
// figures and the per-variant configs. It returns the first drawing or write error.
func WriteHTML(w io.Writer, results []Result, s Setup) error {
	figs, err := Plots(results, s)
	if err != nil {
		return err
	}
	rows := make([][]string, len(results))
	for i, r := range results {
		rows[i] = Cells(r, s.Seqs)
	}
	t := &Table{seqs: s.Seqs}
	data := map[string]any{"Setup": s, "SetupLine": SetupLine(s), "Head": t.head(), "Rows": rows, "Results": results,
		"Figures": figs, "Legend": Legend(s)}
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
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #ddd; }
code, pre { font-size: 0.85em; background: #f6f6f6; } pre { padding: 0.6em; white-space: pre-wrap; }
td code { overflow-wrap: anywhere; }
.setup td:first-child { font-weight: bold; }
</style>
</head>
<body>
<h1>zoo compare</h1>
<p>{{.SetupLine}}</p>
<table class="setup">
<tr><td>command</td><td><code>{{.Setup.Command}}</code></td></tr>
<tr><td>training text</td><td>{{.Setup.Input}}</td></tr>
<tr><td>held-out text</td><td>{{.Setup.Eval}}</td></tr>
<tr><td>budget</td><td>{{.Setup.Steps}} steps × batch {{.Setup.Batch}} × window {{.Setup.Window}} ({{.Setup.Objective}}), the same for every variant</td></tr>
<tr><td>machine</td><td>{{.Setup.CPU}} ({{.Setup.Cores}} cores), {{.Setup.Backend}} {{.Setup.Level}}, {{.Setup.Threads}} threads; zoo {{.Setup.Zoo}}, {{.Setup.GoVer}}</td></tr>
</table>
<h2 id="table">Results</h2>
<table id="results">
<thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr>{{range $i, $c := .}}{{if $i}}<td class="num">{{$c}}</td>{{else}}<td>{{$c}}</td>{{end}}{{end}}</tr>
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
<p>{{.Setup.TimingDoc}}</p>
<p>{{.Setup.MemDoc}}</p>
</body>
</html>
`))
