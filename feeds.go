package zoo

import (
	"fmt"
	"strings"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Role is what zoo feeds a text model's input.
type Role string

// The roles. A mask comes in either polarity: Hugging Face's attention_mask is 1 (or true)
// where a token is real; zoo's and PyTorch's key_padding_mask is true where a position is
// padding.
const (
	RoleIDs       Role = "ids"       // token ids
	RoleMask      Role = "mask"      // 1 = real token, 0 = padding (Hugging Face)
	RolePadding   Role = "padding"   // 1 = padding, 0 = real token (zoo, PyTorch)
	RoleTypes     Role = "types"     // token type (segment) ids: zeros, or a pair's (Batch.Types)
	RolePositions Role = "positions" // position ids: 0 .. n-1 in every window
)

var roles = []Role{RoleIDs, RoleMask, RolePadding, RoleTypes, RolePositions}

const roleList = "ids, mask (1 = keep), padding (1 = padding), types, positions"

// Feed is one graph input and the role it is fed.
type Feed struct {
	Name  string       `json:"name"`
	Role  Role         `json:"role"`
	DType tensor.DType `json:"-"`
	Type  string       `json:"dtype"`
	Shape string       `json:"shape"`
	Why   string       `json:"why"`
}

// FeedPlan is how zoo feeds a text model: each input's role, the static sizes the inputs
// demand, and what the graph says about its limits.
type FeedPlan struct {
	Feeds []Feed `json:"feeds"`
	// Batch and Seq are the inputs' static batch and sequence sizes (0: dynamic); windows
	// and batches are padded to them.
	Batch int `json:"static_batch,omitempty"`
	Seq   int `json:"static_seq,omitempty"`
	// MaxLen is the number of rows of the position table (0: none found), MaxLenFrom its name;
	// or, where no table bounds the length but the graph's shapes do, the longest length they
	// hold at, with MaxLenNode saying where they fail beyond it.
	MaxLen     int    `json:"max_len,omitempty"`
	MaxLenFrom string `json:"max_len_from,omitempty"`
	MaxLenNode string `json:"max_len_node,omitempty"`
	// VocabRows is the number of rows of the token embedding table (0: none found).
	VocabRows int    `json:"vocab_rows,omitempty"`
	VocabFrom string `json:"vocab_from,omitempty"`
}

// IDs returns the name of the token-ids input.
func (p *FeedPlan) IDs() string {
	for _, f := range p.Feeds {
		if f.Role == RoleIDs {
			return f.Name
		}
	}
	return ""
}

// Shapes returns every input's shape for a batch of b windows of n tokens (memory checks).
func (p *FeedPlan) Shapes(b, n int) map[string][]int {
	if p.Batch > 0 {
		b = p.Batch
	}
	if p.Seq > 0 {
		n = p.Seq
	}
	s := map[string][]int{}
	for _, f := range p.Feeds {
		s[f.Name] = []int{b, n}
	}
	return s
}

// guessRole names an input's role from its name, then from its type; "" when neither tells.
func guessRole(in graph.ValueInfo) (Role, string) {
	n := strings.ToLower(in.Name)
	isInt := in.DType == tensor.Int64 || in.DType == tensor.Int32
	switch {
	case strings.Contains(n, "type") || strings.Contains(n, "segment"):
		return RoleTypes, "guessed from its name"
	case strings.Contains(n, "position") || n == "pos_ids":
		return RolePositions, "guessed from its name"
	case strings.Contains(n, "pad") && strings.Contains(n, "mask"):
		return RolePadding, "guessed from its name"
	case strings.Contains(n, "mask") && in.DType == tensor.Bool:
		return RolePadding, "guessed from its name; a bool mask is true = padding, as in PyTorch"
	case strings.Contains(n, "mask"):
		return RoleMask, "guessed from its name; a numeric mask is 1 = keep, as in Hugging Face"
	case isInt && (strings.Contains(n, "ids") || strings.Contains(n, "token") || strings.Contains(n, "input")):
		return RoleIDs, "guessed from its name"
	case in.DType == tensor.Bool:
		return RolePadding, "guessed from its type: a bool input is a padding mask, true = padding"
	}
	return "", ""
}

// PlanFeeds decides how to feed g text: the role of each input (overrides, NAME=ROLE, win over
// the guess), the static sizes, and the position and token tables. It returns an error naming
// the input at fault when an input's role cannot be told or does not fit its type, when an
// override names no input or no role, or when no input takes token ids.
func PlanFeeds(g *graph.Graph, overrides []string) (*FeedPlan, error) {
	forced := map[string]Role{}
	for _, o := range overrides {
		name, r, ok := strings.Cut(o, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf(optFeeds+" %q: want NAME=ROLE (roles: %s)", o, roleList)
		}
		if !validRole(Role(r)) {
			return nil, fmt.Errorf(optFeeds+" %q: unknown role %q (roles: %s)", o, r, roleList)
		}
		if !hasInput(g, name) {
			return nil, fmt.Errorf(optFeeds+" %q: model %s has no input %q (inputs: %s)", o, g.Name, name, inputList(g))
		}
		forced[name] = Role(r)
	}
	p := &FeedPlan{}
	for _, in := range g.Inputs {
		f := Feed{Name: in.Name, DType: in.DType, Type: in.DType.String(), Shape: in.Shape.String()}
		if r, ok := forced[in.Name]; ok {
			f.Role, f.Why = r, "given by "+optFeeds
		} else {
			f.Role, f.Why = guessRole(in)
		}
		if f.Role == "" && (in.DType == tensor.Int64 || in.DType == tensor.Int32) && p.IDs() == "" {
			f.Role, f.Why = RoleIDs, "guessed from its type: the first integer input"
		}
		if f.Role == "" {
			return nil, fmt.Errorf("model %s does not take text as zoo knows it: cannot tell what input %q %s %s takes; name its role with "+optFeeds+" %s=ROLE (roles: %s)", g.Name, in.Name, in.DType, in.Shape, in.Name, roleList)
		}
		if err := checkFeed(in, f.Role); err != nil {
			return nil, fmt.Errorf("model %s: %w", g.Name, err)
		}
		for _, o := range p.Feeds {
			if o.Role == f.Role && f.Role != RoleMask && f.Role != RolePadding {
				return nil, fmt.Errorf("model %s: inputs %q and %q both take %s; name one's role with "+optFeeds+" NAME=ROLE (roles: %s)", g.Name, o.Name, in.Name, f.Role, roleList)
			}
		}
		p.Feeds = append(p.Feeds, f)
		for axis, d := range in.Shape {
			size := 0
			if d.Known() {
				size = int(d.Size)
			}
			if prev := []*int{&p.Batch, &p.Seq}[axis]; size > 0 {
				if *prev > 0 && *prev != size {
					return nil, fmt.Errorf("model %s: input %q is %s, but another input fixes that axis at %d", g.Name, in.Name, in.Shape, *prev)
				}
				*prev = size
			}
		}
	}
	if p.IDs() == "" {
		return nil, fmt.Errorf("model %s does not take text: no input takes token ids (inputs: %s); name it with "+optFeeds+" NAME=ids", g.Name, inputList(g))
	}
	p.findTables(g)
	if p.Seq > 0 && p.MaxLen > 0 && p.Seq > p.MaxLen {
		return nil, fmt.Errorf("model %s: its inputs are fixed at %d tokens, more than its position table %s's %d rows", g.Name, p.Seq, p.MaxLenFrom, p.MaxLen)
	}
	return p, nil
}

func validRole(r Role) bool {
	for _, k := range roles {
		if k == r {
			return true
		}
	}
	return false
}

func hasInput(g *graph.Graph, name string) bool {
	for _, in := range g.Inputs {
		if in.Name == name {
			return true
		}
	}
	return false
}

func inputList(g *graph.Graph) string {
	var parts []string
	for _, in := range g.Inputs {
		parts = append(parts, fmt.Sprintf("%s %s %s", in.Name, in.DType, in.Shape))
	}
	return strings.Join(parts, ", ")
}

// checkFeed refuses a role the input's type or rank cannot take.
func checkFeed(in graph.ValueInfo, r Role) error {
	if len(in.Shape) != 2 {
		return fmt.Errorf("input %q %s is fed %s, which zoo feeds as (batch, seq); its shape %s has rank %d", in.Name, in.DType, r, in.Shape, len(in.Shape))
	}
	ok := in.DType == tensor.Int64 || in.DType == tensor.Int32
	if r == RoleMask || r == RolePadding {
		ok = ok || in.DType == tensor.Bool || in.DType == tensor.Float32
	}
	if !ok {
		return fmt.Errorf("input %q has type %s, which role %s cannot take (ids, types and positions are int64 or int32; masks also bool or float32)", in.Name, in.DType, r)
	}
	return nil
}

// findTables finds the token embedding and the position table among the Gathers of a rank-2
// initializer: the first indexed by the ids input itself is the token table; of the others,
// whose indices come from a positions input, from no input at all (a Range or a Slice of a
// position-ids buffer) or are computed from the ids or the mask, the one with the most rows is
// the position table (a token-type table indexed by a buffer of zeros has as few rows as there
// are types; one indexed by the types input is skipped). A dependency through Shape does not count: Shape reads sizes, not values.
func (p *FeedPlan) findTables(g *graph.Graph) {
	producer := map[string]*graph.Node{}
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			producer[o] = n
		}
	}
	roleOf := map[string]Role{}
	for _, f := range p.Feeds {
		roleOf[f.Name] = f.Role
	}
	memo := map[string]map[Role]bool{}
	var deps func(v string) map[Role]bool
	deps = func(v string) map[Role]bool {
		if d, ok := memo[v]; ok {
			return d
		}
		d := map[Role]bool{}
		memo[v] = d
		if r, ok := roleOf[v]; ok {
			d[r] = true
		}
		if n := producer[v]; n != nil && n.Op != "Shape" {
			for _, in := range n.Inputs {
				if in != "" {
					for r := range deps(in) {
						d[r] = true
					}
				}
			}
		}
		return d
	}
	// The token table is indexed by the ids themselves (maybe cast or reshaped); position ids
	// computed from the ids (RoBERTa's cumulative sum of the non-padding mask) index the
	// position table.
	var isIDs func(v string) bool
	isIDs = func(v string) bool {
		if roleOf[v] == RoleIDs {
			return true
		}
		n := producer[v]
		return n != nil && len(n.Inputs) > 0 && passThrough[n.Op] && isIDs(n.Inputs[0])
	}
	inits := g.InitializerMap()
	for _, n := range g.Nodes {
		if n.Op != "Gather" || n.Int("axis", 0) != 0 {
			continue
		}
		t := inits[n.Input(0)]
		if t == nil || len(t.Shape) != 2 {
			continue
		}
		d := deps(n.Input(1))
		switch {
		case isIDs(n.Input(1)):
			if p.VocabRows == 0 {
				p.VocabRows, p.VocabFrom = t.Shape[0], n.Input(0)
			}
		case d[RoleTypes]:
		case t.Shape[0] > p.MaxLen:
			p.MaxLen, p.MaxLenFrom = t.Shape[0], n.Input(0)
		}
	}
	p.findSlicedTables(g) // feeds_bounds.go
	p.findShapeBound(g)
}

// passThrough are the ops that keep their first input's values (as token ids).
var passThrough = map[string]bool{"Cast": true, "Identity": true, "Reshape": true, "Unsqueeze": true, "Squeeze": true, "Flatten": true}

// SeqAligned tells, for each of g's outputs, whether its axis 1 is the sequence axis (one value
// per token): the declared dim is symbolic, or equals the inputs' static length. An output
// without a declared shape is decided from its first batch (absent from the map).
func SeqAligned(g *graph.Graph, staticSeq int) map[string]bool {
	out := map[string]bool{}
	for _, o := range g.Outputs {
		if o.Shape == nil {
			continue
		}
		out[o.Name] = len(o.Shape) >= 2 && (!o.Shape[1].Known() || (staticSeq > 0 && int(o.Shape[1].Size) == staticSeq))
	}
	return out
}

// Tensors builds the inputs for a batch: every input by its role, padded to the static batch
// and length (extra rows are all padding). pad is the id written at padded positions.
func (p *FeedPlan) Tensors(b *tokenize.Batch, pad int64) (map[string]*tensor.Tensor, error) {
	rows, n := b.B, b.N
	if p.Batch > 0 {
		if b.B > p.Batch {
			return nil, fmt.Errorf("batch of %d windows, but the model's inputs are fixed at batch %d", b.B, p.Batch)
		}
		rows = p.Batch
	}
	if p.Seq > 0 {
		if b.N > p.Seq {
			return nil, fmt.Errorf("window of %d tokens, but the model's inputs are fixed at %d", b.N, p.Seq)
		}
		n = p.Seq
	}
	out := map[string]*tensor.Tensor{}
	for _, f := range p.Feeds {
		t, err := tensor.New(f.DType, rows, n)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", f.Name, err)
		}
		for i := 0; i < rows; i++ {
			l := 0
			if i < b.B {
				l = b.Lengths[i]
			}
			for j := 0; j < n; j++ {
				real := j < l
				var v int64
				switch f.Role {
				case RoleIDs:
					v = pad
					if real {
						v = b.Tokens[i*b.N+j]
					}
				case RoleMask:
					v = b2i(real)
				case RolePadding:
					v = b2i(!real)
				case RolePositions:
					v = int64(j)
				case RoleTypes:
					if real && b.Types != nil {
						v = b.Types[i*b.N+j]
					}
				}
				k := i*n + j
				switch f.DType {
				case tensor.Bool:
					t.Bool[k] = v != 0
				case tensor.Float32:
					t.F32[k] = float32(v)
				default:
					t.I64[k] = v
				}
			}
		}
		out[f.Name] = t
	}
	return out, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Valid returns the valid-position mask of the inputs tensors built for b: (rows, n) of the
// padded tensors, true at real tokens.
func (p *FeedPlan) Valid(b *tokenize.Batch, inputs map[string]*tensor.Tensor) []bool {
	t := inputs[p.IDs()]
	rows, n := t.Shape[0], t.Shape[1]
	v := make([]bool, rows*n)
	for i := 0; i < b.B; i++ {
		for j := 0; j < b.Lengths[i]; j++ {
			v[i*n+j] = true
		}
	}
	return v
}

// CropRows returns outs with every output cut to its first b rows (the real windows of a
// batch padded to a static batch size).
func CropRows(outs map[string]*tensor.Tensor, b int) map[string]*tensor.Tensor {
	cropped := make(map[string]*tensor.Tensor, len(outs))
	for name, t := range outs {
		if len(t.Shape) == 0 || t.Shape[0] <= b {
			cropped[name] = t
			continue
		}
		per := tensor.NumElements(t.Shape[1:])
		c := &tensor.Tensor{DType: t.DType, Shape: append([]int{b}, t.Shape[1:]...)}
		switch {
		case t.F32 != nil:
			c.F32 = t.F32[:b*per]
		case t.I64 != nil:
			c.I64 = t.I64[:b*per]
		case t.Bool != nil:
			c.Bool = t.Bool[:b*per]
		}
		cropped[name] = c
	}
	return cropped
}

// Describe is the plan, one line per input, for `zoo show`.
func (p *FeedPlan) Describe() []string {
	var lines []string
	for _, f := range p.Feeds {
		lines = append(lines, fmt.Sprintf("%s %s %s: %s (%s)", f.Name, f.Type, f.Shape, f.Role, f.Why))
	}
	return lines
}
