package onnx

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// unsupportedOps returns one error that lists every operator of gp that zoo's op table does
// not know, in order of first use, each with its domain (when not ai.onnx), the number of
// nodes using it and the first such node, so that a user sees all that is missing at once;
// it returns nil when every op is known.
func unsupportedOps(gp *onnxpb.GraphProto) error {
	type use struct {
		key, first string
		nodes      int
	}
	var missing []*use
	seen := map[string]*use{}
	for i, np := range gp.GetNode() {
		key := graph.OpKey(np.GetDomain(), np.GetOpType())
		if _, ok := graph.LookupOp(key); ok {
			continue
		}
		u := seen[key]
		if u == nil {
			u = &use{key: key, first: fmt.Sprintf("node %d %q", i, np.GetName())}
			seen[key] = u
			missing = append(missing, u)
		}
		u.nodes++
	}
	if len(missing) == 0 {
		return nil
	}
	parts := make([]string, len(missing))
	for i, u := range missing {
		nodes := "1 node"
		if u.nodes > 1 {
			nodes = fmt.Sprintf("%d nodes, first", u.nodes)
		}
		key := u.key
		if strings.ContainsFunc(key, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
			key = strconv.Quote(key) // a file's op name with a newline must not break the one-line error
		}
		parts[i] = fmt.Sprintf("%s (%s %s)", key, nodes, strings.TrimPrefix(u.first, "node "))
	}
	what := "an op"
	if len(missing) > 1 {
		what = fmt.Sprintf("%d ops", len(missing))
	}
	return fmt.Errorf("the graph uses %s that zoo cannot run: %s", what, strings.Join(parts, ", "))
}
