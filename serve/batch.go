package serve

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// errQueueFull is answered 503 with Retry-After.
var errQueueFull = errors.New("the queue is full; retry later")

// job is one request's sequences on their way through a model's batcher. The batcher's one
// goroutine writes rows and err and closes done; the handler reads them after done.
type job struct {
	ctx    context.Context
	seqs   [][]int64
	types  [][]int64              // each sequence's token type ids, or nil: zeros
	want   []string               // the outputs kept per sequence (nil: every output)
	rows   []map[string][]float32 // per sequence: each output's rows for its positions
	left   int
	err    error
	done   chan struct{}
	queued time.Time
}

// batcher merges a model's queued jobs into batches of up to max sequences, waiting at most
// delay after the first, and runs them one at a time.
type batcher struct {
	m     *model
	q     chan *job
	max   int
	delay time.Duration
	obs   *metrics
}

func newBatcher(m *model, maxBatch, queue int, delay time.Duration, obs *metrics) *batcher {
	if m.MaxBatch > 0 && m.MaxBatch < maxBatch {
		maxBatch = m.MaxBatch
	}
	return &batcher{m: m, q: make(chan *job, queue), max: maxBatch, delay: delay, obs: obs}
}

// submit queues seqs (with their token type ids, or nil) and waits for their rows of the
// outputs want (nil: every output); it returns errQueueFull at once when the queue is full,
// and ctx's error when ctx ends first.
func (b *batcher) submit(ctx context.Context, seqs, types [][]int64, want []string) ([]map[string][]float32, error) {
	j := &job{ctx: ctx, seqs: seqs, types: types, want: want, rows: make([]map[string][]float32, len(seqs)), left: len(seqs), done: make(chan struct{}), queued: time.Now()}
	select {
	case b.q <- j:
	default:
		return nil, errQueueFull
	}
	select {
	case <-j.done:
		return j.rows, j.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// loop runs batches until ctx ends; jobs still queued then are answered with ctx's error.
func (b *batcher) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var first *job
		select {
		case first = <-b.q:
		case <-ctx.Done():
			b.drain(ctx.Err())
			return
		}
		pending, n := []*job{first}, len(first.seqs)
		timer.Reset(time.Until(first.queued.Add(b.delay)))
	collect:
		for n < b.max {
			// Requests already queued join first: after a long batch the first's delay
			// has passed, and a select between the queue and the fired timer would pick
			// at random, leaving batches of one or two behind a full queue.
			select {
			case j := <-b.q:
				pending = append(pending, j)
				n += len(j.seqs)
				continue
			default:
			}
			select {
			case j := <-b.q:
				pending = append(pending, j)
				n += len(j.seqs)
			case <-timer.C:
				break collect
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		b.run(ctx, pending)
	}
}

func (b *batcher) drain(err error) {
	for {
		select {
		case j := <-b.q:
			j.err = err
			close(j.done)
		default:
			return
		}
	}
}

// seqRef is one sequence of a pending job.
type seqRef struct {
	j *job
	i int
}

// bucket is a length's bucket: sequences within a power of two share batches.
func bucket(l int) int { return bits.Len(uint(l)) }

// run splits pending's sequences (of jobs whose clients still wait) into batches of one
// length bucket, up to b.max each, longest first, and runs them.
func (b *batcher) run(ctx context.Context, pending []*job) {
	var refs []seqRef
	for _, j := range pending {
		if j.ctx.Err() != nil {
			j.err = j.ctx.Err()
			close(j.done)
			continue
		}
		for i := range j.seqs {
			refs = append(refs, seqRef{j, i})
		}
	}
	slices.SortStableFunc(refs, func(x, y seqRef) int { return len(y.j.seqs[y.i]) - len(x.j.seqs[x.i]) })
	for start := 0; start < len(refs); {
		end := start + 1
		for end < len(refs) && end-start < b.max && bucket(len(refs[end].j.seqs[refs[end].i])) == bucket(len(refs[start].j.seqs[refs[start].i])) {
			end++
		}
		b.runFitting(ctx, refs[start:end])
		start = end
	}
}

// runFitting runs refs (longest first) as one batch when it fits in memory, else in halves;
// a single sequence that does not fit (memory has shrunk since its request was let in) is
// answered 503, to be retried.
func (b *batcher) runFitting(ctx context.Context, refs []seqRef) {
	n := len(refs[0].j.seqs[refs[0].i])
	if err := b.m.enc.Fits(len(refs), n); err != nil {
		if len(refs) > 1 {
			half := len(refs) / 2
			b.runFitting(ctx, refs[:half])
			b.runFitting(ctx, refs[half:])
			return
		}
		b.finish(refs, nil, &httpError{code: 503, msg: fmt.Sprintf("model %s: not enough memory for a sequence of %d tokens just now: %v", b.m.Name, n, err)})
		return
	}
	b.runBatch(ctx, refs)
}

// runBatch runs one batch, padded to its longest sequence, and hands each sequence its rows.
func (b *batcher) runBatch(ctx context.Context, refs []seqRef) {
	n := len(refs[0].j.seqs[refs[0].i])
	batch := &tokenize.Batch{B: len(refs), N: n, Tokens: make([]int64, len(refs)*n), Mask: make([]bool, len(refs)*n),
		Lengths: make([]int, len(refs)), Offsets: make([]int64, len(refs))}
	tokens := 0
	for _, ref := range refs {
		if ref.j.types != nil {
			batch.Types = make([]int64, len(refs)*n)
			break
		}
	}
	for r, ref := range refs {
		s := ref.j.seqs[ref.i]
		copy(batch.Tokens[r*n:], s)
		if ref.j.types != nil {
			copy(batch.Types[r*n:], ref.j.types[ref.i])
		}
		for k := len(s); k < n; k++ {
			batch.Tokens[r*n+k], batch.Mask[r*n+k] = b.m.Pad, true
		}
		batch.Lengths[r] = len(s)
		tokens += len(s)
	}
	t0 := time.Now()
	outs, err := b.m.enc.Run(ctx, batch)
	if err == nil {
		err = b.checkOutputs(outs, batch)
	}
	b.obs.batch(b.m.Name, len(refs), tokens, time.Since(t0))
	if err != nil {
		err = fmt.Errorf("run %s: %w", b.m.Name, err)
	}
	b.finish(refs, outs, err)
}

// finish hands each sequence of refs its rows of outs (row r for refs[r]), or err, and
// closes the jobs that have all their sequences.
func (b *batcher) finish(refs []seqRef, outs map[string]*tensor.Tensor, err error) {
	for r, ref := range refs {
		j := ref.j
		if err != nil {
			if j.err == nil {
				j.err = err
			}
		} else {
			j.rows[ref.i] = rowsOf(b.m, outs, r, len(j.seqs[ref.i]), j.want)
		}
		j.left--
		if j.left == 0 {
			close(j.done)
		}
	}
}

// checkOutputs returns an error when an output of m is missing from outs or does not have
// b.B rows (and b.N positions when it is per token).
func (b *batcher) checkOutputs(outs map[string]*tensor.Tensor, batch *tokenize.Batch) error {
	for _, o := range b.m.Outputs {
		t := outs[o.Name]
		switch {
		case t == nil || t.DType != tensor.Float32:
			return fmt.Errorf("output %s missing or not float32", o.Name)
		case len(t.Shape) < 1 || t.Shape[0] != batch.B || (o.Seq && (len(t.Shape) < 2 || t.Shape[1] < batch.N)):
			return fmt.Errorf("output %s has shape %v for a batch of %d×%d", o.Name, t.Shape, batch.B, batch.N)
		}
	}
	return nil
}

// rowsOf copies row r of every output in want (nil: all of them): the first l positions of a
// per-token output (whose axis 1 may be longer than the batch's, for a model with a static
// length), the whole row of the others.
func rowsOf(m *model, outs map[string]*tensor.Tensor, r, l int, want []string) map[string][]float32 {
	rows := make(map[string][]float32, len(m.Outputs))
	for _, o := range m.Outputs {
		if want != nil && !slices.Contains(want, o.Name) {
			continue
		}
		t := outs[o.Name]
		per := tensor.NumElements(t.Shape[1:])
		if o.Seq {
			n := t.Shape[1]
			per /= n
			rows[o.Name] = slices.Clone(t.F32[r*n*per : (r*n+l)*per])
		} else {
			rows[o.Name] = slices.Clone(t.F32[r*per : (r+1)*per])
		}
	}
	return rows
}
