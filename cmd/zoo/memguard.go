package main

import (
	"fmt"
	"sort"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The memory guard: before a verb compiles a model and runs it, it estimates what the run
// will take and refuses (exit 2, one line) when that exceeds the memory available to the
// process, saying how much, how much there is, and which flag lowers it. It never shrinks a
// job by itself. The weights' own budget is checked earlier, while the plugin builds them
// (see plugin.WeightCopies).

// memRun is one shape a verb is about to run a graph at.
type memRun struct {
	// batch and n are the batch size and sequence length; shapes gives every graph input's
	// shape at a batch and length.
	batch, n int
	shapes   func(batch, n int) map[string][]int
	// copies is how many runtimes hold the model at once (2 with ONNX Runtime alongside).
	copies int
	// batchFlag and nFlag name the flags that set batch and n ("" when the user cannot
	// change it), for the advice.
	batchFlag, nFlag string
	// est, when set, is the compiled program of the graph, which counts its activations as
	// it will hold them (fusions keep some intermediates to themselves) instead of the
	// graph's node by node; weights then names the graph inputs that are weights fed at run
	// time (a training step's lifted parameters), counted as weights.
	est     backends.ActivationEstimator
	weights []string
}

// tokenShapes returns the shapes of a (tokens, key-padding mask) pair of inputs.
func tokenShapes(tok, mask string) func(b, n int) map[string][]int {
	return func(b, n int) map[string][]int {
		s := map[string][]int{tok: {b, n}}
		if mask != "" {
			s[mask] = []int{b, n}
		}
		return s
	}
}

// memEstimate is what running a graph once takes: the weights once more (compiling folds
// transposed weights into new constants, and a backend keeps its own copy where it packs
// them) plus the peak of live activations (graph.Cost's walk, node outputs freed after
// their last use; or, with r.est, the compiled program's own count), times the copies.
func memEstimate(g *graph.Graph, r memRun, b, n int) (total, weights, acts int64, err error) {
	cost, err := g.Cost(r.shapes(b, n))
	if err != nil {
		return 0, 0, 0, err
	}
	weights, acts = cost.ParamBytes, cost.ActivationBytes
	if r.est != nil {
		vb, err := g.ValueBytes(r.shapes(b, n))
		if err != nil {
			return 0, 0, 0, err
		}
		acts = r.est.PeakActivationBytes(vb)
		for _, w := range r.weights {
			weights += vb[w]
			acts -= vb[w]
		}
	}
	copies := int64(max(r.copies, 1))
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

// checkMemory returns the shortfall of running g at r (r.batch × r.n), or nil when it fits,
// the checks are off (ZOO_MEMORY_LIMIT=off) or the graph's cost cannot be counted (an op
// without a cost rule); the error is a bad ZOO_MEMORY_LIMIT's.
func checkMemory(g *graph.Graph, r memRun) (*memShortfall, error) {
	mem, err := memlimit.Available()
	if err != nil || mem.Off() {
		return nil, err
	}
	total, weights, acts, err := memEstimate(g, r, r.batch, r.n)
	if err != nil || total <= mem.Available {
		return nil, nil
	}
	return &memShortfall{total: total, weights: weights, acts: acts, mem: mem}, nil
}

// guardMemory refuses to run g (called what) at r when the estimate exceeds the memory
// available, with advice naming the flag that lowers it. A graph whose cost cannot be
// counted is not guarded; a bad ZOO_MEMORY_LIMIT is bad input.
func guardMemory(what string, g *graph.Graph, r memRun) error {
	short, err := checkMemory(g, r)
	if err != nil {
		return badInput(err)
	}
	if short == nil {
		return nil
	}
	mem := short.mem
	fits := func(b, n int) bool {
		t, _, _, err := memEstimate(g, r, b, n)
		return err == nil && t <= mem.Available
	}
	nBatch := r.batch // the batch at which a shorter length is sought
	if r.batchFlag != "" {
		nBatch = 1
	}
	var advice string
	switch {
	case r.batchFlag != "" && r.batch > 1 && fits(1, r.n):
		b := sort.Search(r.batch, func(b int) bool { return !fits(b+1, r.n) }) // the largest batch that fits
		advice = fmt.Sprintf("lower %s to %d or less", r.batchFlag, b)
	case r.nFlag != "" && r.n > 1 && fits(nBatch, 1):
		n := sort.Search(r.n, func(n int) bool { return !fits(nBatch, n+1) })
		advice = fmt.Sprintf("lower %s to %d or less", r.nFlag, n)
		if nBatch != r.batch {
			advice = fmt.Sprintf("lower %s to 1 and %s to %d or less", r.batchFlag, r.nFlag, n)
		}
	default:
		advice = "the weights alone do not fit: choose a smaller model or preset (--preset, --set)"
		if r.batchFlag == "" && r.nFlag == "" && short.weights <= mem.Available {
			advice = "feed smaller inputs"
		}
	}
	if r.batch == 0 && r.n == 0 { // not a token model: its inputs' shapes say the size
		return badInputf("running %s needs %s: %s", what, short.String(r.copies), advice)
	}
	return badInputf("running %s at batch %d × %d tokens needs %s: %s", what, r.batch, r.n, short.String(r.copies), advice)
}

// guardBench checks every batch size and length `zoo bench` will time bm at, before it times
// anything (lengths beyond the model's maximum are skipped there, and here).
func guardBench(bm *benchModel, batches, seqs []int, withORT bool) error {
	copies := 1
	if withORT {
		copies = 2
	}
	for _, b := range batches {
		for _, n := range seqs {
			if bm.maxLen > 0 && n > bm.maxLen {
				continue
			}
			r := memRun{batch: b, n: n, shapes: tokenShapes(bm.tok, bm.mask), copies: copies, batchFlag: "--batch", nFlag: "--seq"}
			if err := guardMemory(bm.displayName(), bm.graph, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// guardParity checks a parity run (ONNX Runtime and zoo, each holding the model) at its
// inputs' shapes; the length is --window's when the tokens come from --input.
func guardParity(name string, g *graph.Graph, inputs map[string]*tensor.Tensor, fromFile bool) error {
	return guardInputs(name, g, inputs, fromFile, 2)
}

// guardInputs checks a run of g on these inputs, with the model held copies times; when g
// takes tokens, the advice names --window for tokens read from a file (fromFile).
func guardInputs(name string, g *graph.Graph, inputs map[string]*tensor.Tensor, fromFile bool, copies int) error {
	shapes := map[string][]int{}
	for k, t := range inputs {
		shapes[k] = t.Shape
	}
	r := memRun{shapes: func(int, int) map[string][]int { return shapes }, copies: copies}
	if tok, mask, err := tokenInputs(g); err == nil && len(shapes[tok]) == 2 {
		r.batch, r.n, r.shapes = shapes[tok][0], shapes[tok][1], tokenShapes(tok, mask)
		if fromFile {
			r.nFlag = "--window"
		}
	}
	return guardMemory(name, g, r)
}
