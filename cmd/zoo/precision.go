package main

import (
	"strings"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/internal/env"
)

// precisions are the values of --precision, the default first (completion offers them).
var precisions = zooroot.Precisions()

// precisionFlagName is the name of the --precision flag.
const precisionFlagName = "precision"

// flagPrecision returns the --precision flag, the one definition every verb that compiles a
// model shares (run, bench, parity, train, serve, eval, profile).
func flagPrecision() cli.Flag {
	return &cli.StringFlag{Name: precisionFlagName, Value: precisions[0],
		Usage: "matrix products in `TYPE`, fp32, bf16 or int8: fp32 is strict IEEE; bf16 rounds their inputs to bf16 and accumulates " +
			"in fp32, the rest staying fp32 (needs the backend's bf16 path: see zoo backends); int8 (cpu, inference only: train refuses it) " +
			"quantizes linear layers' weights per output column and their inputs per row, with exact int32 sums, attention staying fp32; " +
			"int8-attention also runs attention's two products in int8 (keys per key, values per channel, queries and probabilities per row)"}
}

// precisionOf returns the backends.Options.Precision a verb compiles with: "" when
// --precision was not given, so the backend keeps its default (fp32; on cuda
// ZOO_CUDA_PRECISION may set another), else "fp32", "bf16", "int8" or "int8-attention" (case and surrounding space
// ignored). Any other value is bad input (exit 2), naming the values.
func precisionOf(c flags) (string, error) {
	if !c.IsSet(precisionFlagName) {
		return "", nil
	}
	raw := c.String(precisionFlagName)
	p := strings.ToLower(strings.TrimSpace(raw))
	for _, ok := range precisions {
		if p == ok {
			return p, nil
		}
	}
	return "", badInputf("--precision %q: want %s", raw, strings.Join(precisions, " or "))
}

// reportedPrecision is the precision a program of backend compiled with Options.Precision p
// computes in, for reports: p, else the backend's default (fp32, or ZOO_CUDA_PRECISION on
// cuda, which the cuda backend reads when p is "").
func reportedPrecision(backend, p string) string {
	if p != "" {
		return p
	}
	if backend == "cuda" {
		if v, _ := env.Get(env.CUDAPrecision); strings.TrimSpace(v) != "" {
			return strings.ToLower(strings.TrimSpace(v))
		}
	}
	return precisions[0]
}
