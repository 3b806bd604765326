// Package bench is the machinery of `zoo bench`: timing one program (timing.go) or zoo
// against a reference runtime in interleaved pairs, peak-RSS probes through /proc (mem.go),
// the SGEMM peak a backend reaches (peak.go), means and fitted power-law exponents (fit.go),
// the report's data model (report.go) and its rendering as a table, markdown, CSV or JSON,
// row by row as rows finish (render.go), and the benchmark itself (run.go): its flags
// checked, every model on every backend at every batch size and length, one row each. The
// command in cmd/zoo/bench.go reads the flags, loads the models and hands them to Run; a new
// column goes into Row and render.go, a new output format into render.go.
package bench
