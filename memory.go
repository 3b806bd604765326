package zoo

import (
	"errors"
	"fmt"
	"sort"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// The memory guard: before a caller compiles a model and runs it, it estimates what the run
// will take and refuses (exit 2, one line) when that exceeds the memory available to the
// process, saying how much, how much there is, and which flag lowers it. It never shrinks a
// job by itself. The weights' own budget is checked earlier, while the plugin builds them
// (see plugin.WeightCopies).

// MemoryRun is one shape a verb is about to run a graph at.
type MemoryRun struct {
	// Batch and N are the batch size and sequence length; Shapes gives every graph input's
	// shape at a batch and length.
	Batch, N int
	Shapes   func(batch, n int) map[string][]int
	// Copies is how many runtimes hold the model at once (2 with ONNX Runtime alongside).
	Copies int
	// BatchOption and NOption name the options (or flags) that set Batch and N ("" when the
	// caller cannot change it), for the advice.
	BatchOption, NOption string
	// Estimator, when set, is the compiled program of the graph, which counts its activations as
	// it will hold them (fusions keep some intermediates to themselves) instead of the
	// graph's node by node; weights then names the graph inputs that are weights fed at run
	// time (a training step's lifted parameters), counted as weights.
	Estimator backends.ActivationEstimator
	Weights   []string
}

// TokenShapes returns the shapes of a (tokens, key-padding mask) pair of inputs.
func TokenShapes(tok, mask string) func(b, n int) map[string][]int {
	return func(b, n int) map[string][]int {
		s := map[string][]int{tok: {b, n}}
		if mask != "" {
			s[mask] = []int{b, n}
		}
		return s
	}
}

// readBudget is the memory the arrays of an input or weights file may take as zoo holds them:
// what the memory guard counts as available (memlimit: ZOO_MEMORY_LIMIT, the cgroup's limit,
// MemAvailable), so that a file that inflates or converts to more (a .npz zip bomb) is
// refused from its headers. It returns 0 (no budget) when the checks are off; a bad
// ZOO_MEMORY_LIMIT is an *InputError.
func readBudget() (int64, string, error) {
	mem, err := memlimit.Available()
	if err != nil {
		return 0, "", inputErr("", err)
	}
	if mem.Off() {
		return 0, "", nil
	}
	return max(mem.Available, 1), mem.Source, nil
}

// withSource names where the budget came from in a *tensorio.BudgetError.
func withSource(err error, source string) error {
	var be *tensorio.BudgetError
	if errors.As(err, &be) {
		be.Source = source
	}
	return err
}

// memEstimate is what running a graph once takes: the weights once more (compiling folds
// transposed weights into new constants, and a backend keeps its own copy where it packs
// them) plus the peak of live activations (graph.Cost's walk, node outputs freed after
// their last use; or, with r.Estimator, the compiled program's own count), times the copies.
func memEstimate(g *graph.Graph, r MemoryRun, b, n int) (total, weights, acts int64, err error) {
	cost, err := g.Cost(r.Shapes(b, n))
	if err != nil {
		return 0, 0, 0, err
	}
	weights, acts = cost.ParamBytes, cost.ActivationBytes
	if r.Estimator != nil {
		vb, err := g.ValueBytes(r.Shapes(b, n))
		if err != nil {
			return 0, 0, 0, err
		}
		acts = r.Estimator.PeakActivationBytes(vb)
		for _, w := range r.Weights {
			weights += vb[w]
			acts -= vb[w]
		}
	}
	copies := int64(max(r.Copies, 1))
	sat := func(x int64) int64 {
		if x > (1<<63-1)/copies {
			return 1<<63 - 1
		}
		return x * copies
	}
	weights, acts = sat(weights), sat(acts)
	total = weights + acts
	if total < 0 {
		total = 1<<63 - 1
	}
	return total, weights, acts, nil
}

// memShortfall is a run that does not fit: its estimate and the memory available.
type memShortfall struct {
	total, weights, acts int64
	mem                  memlimit.Info
}

// String is "about 1.2 GiB (weights 10 MiB, activations 1.2 GiB), but only 800 MiB of memory
// is available (MemAvailable)", with the copies when there are several.
func (s *memShortfall) String(copies int) string {
	c := ""
	if copies > 1 {
		c = fmt.Sprintf(", %d runtimes", copies)
	}
	return fmt.Sprintf("about %s (weights %s, activations %s%s), but only %s of memory is available (%s)",
		memlimit.Bytes(s.total), memlimit.Bytes(s.weights), memlimit.Bytes(s.acts), c, memlimit.Bytes(s.mem.Available), s.mem.Source)
}

// checkMemory returns the shortfall of running g at r (r.Batch × r.N), or nil when it fits,
// the checks are off (ZOO_MEMORY_LIMIT=off) or the graph's cost cannot be counted (an op
// without a cost rule); the error is a bad ZOO_MEMORY_LIMIT's.
func checkMemory(g *graph.Graph, r MemoryRun) (*memShortfall, error) {
	mem, err := memlimit.Available()
	if err != nil || mem.Off() {
		return nil, err
	}
	total, weights, acts, err := memEstimate(g, r, r.Batch, r.N)
	if err != nil || total <= mem.Available {
		return nil, nil
	}
	return &memShortfall{total: total, weights: weights, acts: acts, mem: mem}, nil
}

// MemoryShortfall describes how running g at r would exceed the memory available ("about 1.2
// GiB (weights …), but only 800 MiB of memory is available (MemAvailable)"), or returns "" when
// it fits, the checks are off or g's cost cannot be counted; the error is a bad
// ZOO_MEMORY_LIMIT's.
func MemoryShortfall(g *graph.Graph, r MemoryRun) (string, error) {
	short, err := checkMemory(g, r)
	if err != nil || short == nil {
		return "", err
	}
	return short.String(r.Copies), nil
}

// GuardMemory refuses to run g (called what) at r when the estimate exceeds the memory
// available (memlimit: ZOO_MEMORY_LIMIT, the cgroup's limit, MemAvailable), with an
// *InputError whose advice names the option that lowers it. A graph whose cost cannot be
// counted is not guarded; a bad ZOO_MEMORY_LIMIT is bad input.
func GuardMemory(what string, g *graph.Graph, r MemoryRun) error {
	short, err := checkMemory(g, r)
	if err != nil {
		return inputErr("", err)
	}
	if short == nil {
		return nil
	}
	mem := short.mem
	fits := func(b, n int) bool {
		t, _, _, err := memEstimate(g, r, b, n)
		return err == nil && t <= mem.Available
	}
	nBatch := r.Batch // the batch at which a shorter length is sought
	if r.BatchOption != "" {
		nBatch = 1
	}
	var advice string
	switch {
	case r.BatchOption != "" && r.Batch > 1 && fits(1, r.N):
		b := sort.Search(r.Batch, func(b int) bool { return !fits(b+1, r.N) }) // the largest batch that fits
		advice = fmt.Sprintf("lower %s to %d or less", r.BatchOption, b)
	case r.NOption != "" && r.N > 1 && fits(nBatch, 1):
		n := sort.Search(r.N, func(n int) bool { return !fits(nBatch, n+1) })
		advice = fmt.Sprintf("lower %s to %d or less", r.NOption, n)
		if nBatch != r.Batch {
			advice = fmt.Sprintf("lower %s to 1 and %s to %d or less", r.BatchOption, r.NOption, n)
		}
	default:
		advice = "the weights alone do not fit: choose a smaller model or preset (" + optPreset + ", " + optSet + ")"
		if r.BatchOption == "" && r.NOption == "" && short.weights <= mem.Available {
			advice = "feed smaller inputs"
		}
	}
	if r.Batch == 0 && r.N == 0 { // not a token model: its inputs' shapes say the size
		return inputErrf("", "running %s needs %s: %s", what, short.String(r.Copies), advice)
	}
	return inputErrf("", "running %s at batch %d × %d tokens needs %s: %s", what, r.Batch, r.N, short.String(r.Copies), advice)
}

// GuardInputs checks a run of g on these inputs, with the model held copies times; when g
// takes tokens, the advice names window (the option that sets their length; "" for none).
func GuardInputs(name string, g *graph.Graph, inputs map[string]*tensor.Tensor, window string, copies int) error {
	shapes := map[string][]int{}
	for k, t := range inputs {
		shapes[k] = t.Shape
	}
	r := MemoryRun{Shapes: func(int, int) map[string][]int { return shapes }, Copies: copies}
	if tok, mask, err := TokenInputs(g); err == nil && len(shapes[tok]) == 2 {
		r.Batch, r.N, r.Shapes = shapes[tok][0], shapes[tok][1], TokenShapes(tok, mask)
		r.NOption = window
	}
	return GuardMemory(name, g, r)
}
