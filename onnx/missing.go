package onnx

import (
	"fmt"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// adaptedOps are ai.onnx operators outside graph's op table that the import adapters
// (opset.go) rewrite into table ops.
var adaptedOps = map[string]bool{"Dropout": true, "Flatten": true}

// missingOps returns an error that lists, at once, every operator of gp that zoo cannot run
// (ai.onnx ops the IR does not know, and ops of other domains), each with its node count and
// first node, so that a user sees the whole gap rather than the first op of it. It returns nil
// when every op is known.
func missingOps(gp *onnxpb.GraphProto) error {
	type gap struct {
		n     int
		first string
	}
	gaps := map[string]*gap{}
	for i, np := range gp.GetNode() {
		op := np.GetOpType()
		if d := np.GetDomain(); !isONNXDomain(d) {
			op = d + "." + op
		} else if _, ok := graph.LookupOp(op); ok || adaptedOps[op] {
			continue
		}
		g := gaps[op]
		if g == nil {
			g = &gap{first: nodeWhere(i, np)}
			gaps[op] = g
		}
		g.n++
	}
	if len(gaps) == 0 {
		return nil
	}
	ops := make([]string, 0, len(gaps))
	for op := range gaps {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%s (%d×, first %s)", op, gaps[op].n, gaps[op].first)
	}
	what := "ops are"
	if len(ops) == 1 {
		what = "op is"
	}
	return fmt.Errorf("%d %s not supported by zoo's IR: %s", len(ops), what, strings.Join(parts, "; "))
}
