package zoo

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// MetaMaxLen returns max_len from the config a zoo-exported file records (it bounds the
// windows), or 0.
func MetaMaxLen(g *graph.Graph) int {
	var cfg map[string]any
	if json.Unmarshal([]byte(g.Meta["config"]), &cfg) == nil {
		if v, ok := cfg["max_len"].(float64); ok && v >= 1 && v == math.Trunc(v) && v < 1<<31 {
			return int(v)
		}
	}
	return 0
}

// TokenInputs returns the inputs of a model that takes token ids and at most a key-padding
// mask (bool, true = padding), as zoo's own graphs do; the roles come from PlanFeeds. A model
// with other inputs (an attention mask, token types, ...) is an error naming them.
func TokenInputs(g *graph.Graph) (tokens, mask string, err error) {
	p, err := PlanFeeds(g, nil)
	if err != nil {
		return "", "", err
	}
	for _, f := range p.Feeds {
		switch {
		case f.Role == RoleIDs && f.DType == tensor.Int64:
			tokens = f.Name
		case f.Role == RolePadding && f.DType == tensor.Bool:
			mask = f.Name
		default:
			return "", "", fmt.Errorf("model %s: input %s %s takes %s; only token ids (int64) and a key-padding mask (bool) are fed here", g.Name, f.Name, f.Type, f.Role)
		}
	}
	return tokens, mask, nil
}
