package cpu

import (
	"math"
	"slices"
	"sync"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The fused attention kernel behind fuse_attention.go's pattern. The fused linear kernel
// is in fused_linear.go, the permuted residual in fused_residual.go, and the in-place views
// of transposed and broadcast operands in operand.go.

// Attention tiling. A task is one (batch, head) matrix and one block of query rows; it
// walks the keys in blocks, keeping a running row maximum m and sum l (the online softmax
// of FlashAttention): for each key block it computes the scores S = Q·Kᵀ with one SGEMM,
// applies the scale and mask ops, rescales what it has accumulated when the maximum grows,
// and adds exp(S − m)·V into the output with a second SGEMM. The n×n score matrix never
// exists; a task's scratch is one attnQBlock × attnKBlock tile (256 KiB), sized to stay in
// L2 next to the V block. Shares of one matrix's query rows (see attnSharedTasks) read Kᵀ and
// V blocks packed for all of them beforehand; a whole matrix packs its own as it goes. The
// shared packs hold all of Kᵀ and V once more, which only steps of few matrices use.
//
// The partition into tasks and blocks depends only on the shapes, and every task runs the
// same code in the same order whichever goroutine takes it, so the result is bitwise the
// same for any thread count.
const (
	attnQBlock = 128 // query rows per task (fewer when that leaves too few tasks)
	attnKBlock = 512 // keys per block: sequences up to 512 need no rescaling at all
	attnMinQ   = 32  // smallest query block used to create parallel tasks
	attnTasks  = 8   // aim for at least this many tasks (independent of the thread count)
	// attnSharedTasks: with fewer matrices than this, their query rows are also shared out
	// in whole attnQBlock blocks, up to this many tasks, the packed Kᵀ and V blocks being
	// shared by the shares of a matrix. One task per head (8 at batch 1) leaves a core idle
	// for up to one task's time at the end of every step when the two cores of a shared VM
	// run at different speeds. Interleaved A/B on the base encoder, 2 threads, against one
	// task per head: batch 1 n=512 1.000-1.016 faster, batch 2 n=512 1.005-1.014, n=2048
	// 1.011. Shares of 32 rows at n=128 ran 3.6 % slower, hence whole blocks only.
	attnSharedTasks = 32
)

// attnState is one task's scratch: the score tile, the running row maxima and sums, and
// the packed Kᵀ and V blocks of its head.
type attnState struct {
	s, m, l []float32
	kt, v   gemm.PackedB
	p       gemm.Int8Rows // an int8-attention run's quantized probabilities
}

var attnStates = sync.Pool{New: func() any {
	return &attnState{s: make([]float32, attnQBlock*attnKBlock)}
}}

// attnPacks holds the packed Kᵀ and V blocks of every matrix of one attention step when its
// query rows are shared out (block kb of matrix b at index b·nkb+kb); a pool keeps their
// storage from step to step.
type attnPacks struct {
	kt, v []gemm.PackedB
}

var attnPackSets = sync.Pool{New: func() any { return new(attnPacks) }}

// grow makes room for n blocks, keeping the storage of those already there.
func (p *attnPacks) grow(n int) {
	if len(p.kt) < n {
		p.kt = append(p.kt, make([]gemm.PackedB, n-len(p.kt))...)
		p.v = append(p.v, make([]gemm.PackedB, n-len(p.v))...)
	}
}

// attentionFast is the fused attention fast path: in holds Q (…, nq, dk), Kᵀ (…, dk, nk),
// V (…, nk, dv) with equal batch dimensions, each given as the source of a chain of
// Transposes with the composed permutation perms[j] (nil: none), read through the sliding
// window wins[j] first where it is set (fuse_sparse.go), then the operands of ops.
// When outPerm is set the result is Transpose(attention, outPerm), written in place. It
// axis is the softmax's axis attribute, which must name the last axis. It returns ok false
// for anything else (the fused step then runs the original steps).
// With split's reshapes, Q's rows and the output's are merged pairs of axes
// (attention_rows.go); perms[0] and outPerm then have one axis more.
func attentionFast(e *exec, in []*tensor.Tensor, ops []scoreOp, perms [3][]int, wins [3]*window, outPerm []int, split attnSplit, axis int) (*tensor.Tensor, bool, error) {
	out, _, ok, err := attentionRows(e, in, ops, perms, wins, outPerm, split, axis, false)
	return out, ok, err
}

// attentionRun is attentionFast that, when withLSE is set, also returns each query row's
// log-sum-exp of its scores, m + log(l) (batch…, nq), what a training step's backward pass
// needs to recompute the probabilities tile by tile (attention_grad.go).
func attentionRun(e *exec, in []*tensor.Tensor, ops []scoreOp, perms [3][]int, wins [3]*window, outPerm []int, axis int, withLSE bool) (out, lse *tensor.Tensor, ok bool, err error) {
	return attentionRows(e, in, ops, perms, wins, outPerm, attnSplit{}, axis, withLSE)
}

// attentionRows is attentionRun with attentionFast's row reshapes.
func attentionRows(e *exec, in []*tensor.Tensor, ops []scoreOp, perms [3][]int, wins [3]*window, outPerm []int, split attnSplit, axis int, withLSE bool) (out, lse *tensor.Tensor, ok bool, err error) {
	q, kt, v := in[0], in[1], in[2]
	if q == nil || kt == nil || v == nil || q.DType != tensor.Float32 || kt.DType != tensor.Float32 || v.DType != tensor.Float32 {
		return nil, nil, false, nil
	}
	qShape, qStride, ok1 := srcView(q, perms[0], wins[0], in)
	kShape, kStride, ok2 := srcView(kt, perms[1], wins[1], in)
	vShape, vStride, ok3 := srcView(v, perms[2], wins[2], in)
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, false, nil
	}
	var qOuter, qSeg int
	if split.q != nil {
		if qShape, qStride, qOuter, qSeg, ok1 = mergeRows(split.q, qShape, qStride); !ok1 {
			return nil, nil, false, nil
		}
	}
	r := len(qShape)
	if r < 2 || len(kShape) != r || len(vShape) != r || (axis != -1 && axis != r-1) {
		return nil, nil, false, nil
	}
	batch := qShape[:r-2]
	if !tensor.SameShape(batch, kShape[:r-2]) || !tensor.SameShape(batch, vShape[:r-2]) {
		return nil, nil, false, nil
	}
	nq, dk, nk, dv := qShape[r-2], qShape[r-1], kShape[r-1], vShape[r-1]
	if kShape[r-2] != dk || vShape[r-2] != nk || nq == 0 || dk == 0 || nk == 0 || dv == 0 {
		return nil, nil, false, nil
	}
	// Q and V rows and output rows must be contiguous; Kᵀ may be either way round (a
	// transposed pack reads K's rows).
	if qStride[r-1] != 1 || vStride[r-1] != 1 || (kStride[r-1] != 1 && kStride[r-2] != 1) {
		return nil, nil, false, nil
	}
	operands := make([]bcastOperand, len(in))
	for _, op := range ops {
		if (split.q != nil || split.out != nil) && (op.kind == 'c' || op.kind == 'C' || op.kind == 'r') {
			// a causal or relative position's row is its query's position, which merged
			// rows are not
			return nil, nil, false, nil
		}
		if !isOperandKind(op.kind) {
			continue
		}
		t := in[op.input]
		if op.kind == 'c' || op.kind == 'C' {
			if !causalFits(op.cm, t, nq, nk) {
				return nil, nil, false, nil
			}
			continue
		}
		if op.kind == 'r' {
			bo, ok := planRelBias(op.rb, t, batch, nq, nk)
			if !ok {
				return nil, nil, false, nil
			}
			operands[op.input] = bo
			continue
		}
		where := op.kind == 'w' || op.kind == 'W'
		want := tensor.Float32
		if where {
			want = tensor.Bool
		}
		if t == nil || t.DType != want {
			return nil, nil, false, nil
		}
		bo, ok := planOperand(t, batch, nq, nk)
		if !ok {
			return nil, nil, false, nil
		}
		switch {
		case where:
			bo.planReplace(op.kind, op.c, nk)
		case op.kind == '+':
			bo.planZero(nk)
		}
		operands[op.input] = bo
	}
	diag, skip := causalSkip(ops)
	logical := append(append([]int{}, batch...), nq, dv)
	outShape := logical
	var oStride []int
	var oOuter, oSeg int
	if outPerm != nil {
		axes := logical // the axes outPerm permutes
		if split.out != nil {
			if axes, ok = splitRows(split.out, logical); !ok {
				return nil, nil, false, nil
			}
		}
		ra := len(axes)
		if len(outPerm) != ra {
			return nil, nil, false, nil
		}
		outShape = make([]int, ra)
		seen := make([]bool, ra)
		for j, a := range outPerm {
			if a < 0 || a >= ra || seen[a] {
				return nil, nil, false, nil
			}
			seen[a] = true
			outShape[j] = axes[a]
		}
		// axis outPerm[j] of axes is axis j of the output
		_, fs, _ := permView(outShape, nil)
		oStride = make([]int, ra)
		for j, a := range outPerm {
			oStride[a] = fs[j]
		}
		if oStride[ra-1] != 1 {
			return nil, nil, false, nil
		}
		if split.out != nil {
			oOuter, oSeg = oStride[r-2], axes[r-1]
			oStride = append(append(oStride[:r-2:r-2], oStride[r-1]), oStride[r])
		}
	} else if split.out != nil {
		return nil, nil, false, nil
	} else {
		_, oStride, _ = permView(logical, nil)
	}
	out, err = e.allocRaw(outShape)
	if err != nil {
		return nil, nil, true, err
	}
	if withLSE {
		if lse, err = e.allocRaw(append([]int(nil), logical[:r-1]...)); err != nil {
			return nil, nil, true, err
		}
	}
	qs, ks, vs, ost := batchStrided(batch, qStride), batchStrided(batch, kStride), batchStrided(batch, vStride), batchStrided(batch, oStride)
	qs.seg, qs.outer, ost.seg, ost.outer = qSeg, qOuter, oSeg, oOuter
	// blockRows is the height of the block of query rows from q0 (of a task ending at qHi):
	// attnQBlock at most, and within one segment of merged rows.
	blockRows := func(q0, qHi int) int { return ost.segRows(q0, qs.segRows(q0, min(attnQBlock, qHi-q0))) }
	nb := graph.NumElements(batch)
	nkb := (nk + attnKBlock - 1) / attnKBlock
	// An int8-attention run (attention_int8.go) folds the leading scalings of the scores
	// into the first product and packs Kᵀ and V as int8; a training step's forward pass
	// (withLSE) stays fp32.
	attn8 := e.attn8 && !withLSE
	// fold: int8-attention over a single block of keys divides by the row sums in P·V's
	// dequantization (Int8Rows.ScaleRow).
	fold := attn8 && nk <= attnKBlock
	qscale, sops := float32(1), ops
	if attn8 {
		qscale, sops = foldScoreScale(ops)
	}
	// packKV packs key block k0 of matrix b: Kᵀ's columns and V's rows k0….
	packKV := func(ktp, vp *gemm.PackedB, b, k0 int) {
		cols := min(attnKBlock, nk-k0)
		if attn8 {
			packKVInt8(ktp, vp, kt, v, ks, vs, b, k0, cols, dk, dv)
			return
		}
		if ks.cs == 1 {
			e.packB(ktp, false, dk, cols, kt.F32[ks.off[b]+k0:], ks.ld)
		} else {
			e.packB(ktp, true, dk, cols, kt.F32[ks.off[b]+k0*ks.cs:], ks.cs)
		}
		e.packB(vp, false, cols, dv, v.F32[vs.off[b]+k0*vs.ld:], vs.ld)
	}
	// A task is one (batch, head) matrix, or a contiguous share of its query rows when there
	// are too few matrices to make attnTasks tasks (shares of attnMinQ rows or more), or
	// attnSharedTasks tasks (whole attnQBlock blocks). With whole matrices, a task packs each
	// block of Kᵀ and V itself, just before it reads them. With shares, the blocks are packed
	// once beforehand (one parallel step) and every share of the matrix reads them: the
	// shares balance the threads without packing the same blocks again.
	chunks := 1
	if nb < attnTasks {
		chunks = min((attnTasks+nb-1)/nb, (nq+attnMinQ-1)/attnMinQ)
	}
	if nb < attnSharedTasks {
		chunks = max(chunks, min((attnSharedTasks+nb-1)/nb, nq/attnQBlock))
	}
	per := (nq + chunks - 1) / chunks
	chunks = (nq + per - 1) / per
	var packs *attnPacks
	// int8-attention over sliding windows packs the runs of keys they are cut from
	// (attention_int8.go): kp and vp are then set.
	var kp, vp *windowParents
	if attn8 && nkb == 1 && wins[1] != nil && wins[2] != nil {
		kpar, ok1 := parentsOf(kt, perms[1], wins[1], batch, r-1, ks)
		vpar, ok2 := parentsOf(v, perms[2], wins[2], batch, r-2, vs)
		if ok1 && ok2 && vpar.keys <= gemm.MaxInt8K { // V's keys are its packed k
			packs = attnPackSets.Get().(*attnPacks)
			defer attnPackSets.Put(packs)
			nkp, nvp := len(kpar.off), len(vpar.off)
			packs.grow(max(nkp, nvp))
			workpool.Tasks(e.threads, nkp+nvp, func(t int) {
				if t < nkp {
					packKtInt8(&packs.kt[t], kt, kpar.off[t], ks, kpar.keys, dk)
					return
				}
				packs.v[t-nkp].PackInt8Activation(false, vpar.keys, dv, v.F32[vpar.off[t-nkp]:], vs.ld)
			})
			// windows must start on the packs' column tiles and k steps (both 4 and 32
			// divide the sparse variant's blocks of 64)
			ca, kstep := packs.kt[0].ColAlign(), packs.v[0].Int8KStep()
			kp, vp = &kpar, &vpar
			for b := range nb {
				if kpar.start[b]%ca != 0 || vpar.start[b]%kstep != 0 {
					kp, vp = nil, nil
					break
				}
			}
		}
	}
	if kp == nil && chunks > 1 {
		if packs == nil {
			packs = attnPackSets.Get().(*attnPacks)
			defer attnPackSets.Put(packs)
		}
		packs.grow(nb * nkb)
		workpool.Tasks(e.threads, nb*nkb, func(t int) {
			packKV(&packs.kt[t], &packs.v[t], t/nkb, t%nkb*attnKBlock)
		})
	} else if kp == nil && packs != nil {
		packs = nil // the windows' own packs after all: each task packs its own
	}
	workpool.Tasks(e.threads, nb*chunks, func(t int) {
		b := t / chunks
		qLo := (t % chunks) * per
		qHi := min(qLo+per, nq)
		st := attnStates.Get().(*attnState)
		defer attnStates.Put(st)
		s := st.s
		if cap(st.m) < qHi-qLo {
			st.m, st.l = make([]float32, qHi-qLo), make([]float32, qHi-qLo)
		}
		m, l := st.m[:qHi-qLo], st.l[:qHi-qLo]
		for i := range m {
			m[i], l[i] = float32(math.Inf(-1)), 0
		}
		// A head's query rows are far apart in a (batch, n, heads·d) tensor, too far for the
		// hardware prefetchers: the first come from memory while the keys and values are
		// packed, the next block's while this one runs. With the keys' and values' own
		// prefetch (gemm.PackInt8Activation), base b8 n512 in paired runs: int8-attention
		// 1.038× faster, fp32 1.004× (its packs of K and V are not prefetched).
		gemm.Prefetch(q.F32[qs.row(b, qLo):], qs.ld, blockRows(qLo, qHi), dk)
		for k0 := 0; k0 < nk; k0 += attnKBlock {
			if skip && k0 > qHi-1+diag {
				break // every row of the task has these keys masked
			}
			cols := min(attnKBlock, nk-k0)
			ktp, vpk := &st.kt, &st.v
			kj0, vk0 := 0, -1 // a window's first column of its parent's Kᵀ and first row of its V (-1: V is its own)
			switch {
			case kp != nil:
				ktp, vpk = &packs.kt[kp.parent[b]], &packs.v[vp.parent[b]]
				kj0, vk0 = kp.start[b], vp.start[b]
			case packs != nil:
				ktp, vpk = &packs.kt[b*nkb+k0/attnKBlock], &packs.v[b*nkb+k0/attnKBlock]
			default:
				packKV(ktp, vpk, b, k0)
			}
			beta := float32(1)
			if k0 == 0 {
				beta = 0
			}
			for q0, rows := qLo, blockRows(qLo, qHi); q0 < qHi; q0, rows = q0+rows, blockRows(q0+rows, qHi) {
				// With a causal mask the block's keys past its last query are left out.
				width := cols
				if skip {
					width = min(cols, q0+rows+diag-k0)
					if width <= 0 {
						continue
					}
				}
				sc := s[:rows*width]
				if q0+rows < qHi {
					gemm.Prefetch(q.F32[qs.row(b, q0+rows):], qs.ld, blockRows(q0+rows, qHi), dk)
				}
				// An int8-attention block quantizes each row of probabilities as soon as
				// it is final, while it is in L1 (the keys a causal block leaves out as 0).
				if attn8 {
					st.p.PrepareK(vpk, rows, cols, 1)
				}
				gemm.SgemmPackedEpilogueAt(rows, kj0, kj0+width, qscale, q.F32[qs.row(b, q0):], qs.ld, ktp, 0, sc, width, nil)
				o := out.F32[ost.row(b, q0):]
				mq, lq := m[q0-qLo:], l[q0-qLo:]
				for i := 0; i < rows; i++ {
					row := sc[i*width : (i+1)*width]
					applyScoreOps(row, sops, operands, b, q0+i, k0)
					mx := vec.Max(row)
					mnew := mx
					if mx == mx && mq[i] > mx {
						mnew = mq[i]
					}
					if math.IsInf(float64(mnew), -1) {
						clear(row) // every key so far is masked out
						if attn8 {
							st.p.QuantizeUnit(i, row)
						}
						continue
					}
					// The first block of keys a row sees has nothing to rescale (exp(−Inf) = 0).
					alpha := float32(0)
					if !math.IsInf(float64(mq[i]), -1) {
						alpha = float32(math.Exp(float64(mq[i] - mnew)))
					}
					sum := expRow(&st.p, attn8, i, row, mnew)
					if k0 > 0 && alpha != 1 {
						vec.Scale(o[i*ost.ld:i*ost.ld+dv], alpha)
					}
					lq[i] = lq[i]*alpha + sum
					mq[i] = mnew
				}
				switch {
				case attn8:
					if fold {
						// The only block of keys: l is final, and 1/l joins the
						// probabilities' scale instead of a pass over the output rows.
						for i := 0; i < rows; i++ {
							st.p.ScaleRow(i, 1/lq[i])
						}
					}
					if vk0 >= 0 {
						gemm.SgemmInt8RowsKAt(&st.p, 0, rows, 0, dv, vk0, vpk, beta, o, ost.ld, nil)
					} else {
						gemm.SgemmInt8RowsAt(&st.p, 0, rows, 0, dv, vpk, beta, o, ost.ld, nil)
					}
				case width == cols:
					gemm.SgemmPacked(rows, dv, cols, 1, sc, cols, vpk, beta, o, ost.ld)
				default:
					e.sgemm(false, false, rows, dv, width, 1, sc, width, v.F32[vs.off[b]+k0*vs.ld:], vs.ld, beta, o, ost.ld)
				}
			}
		}
		for i := range m {
			// a row with every key masked has l = 0 and gives 0/0 = NaN, as the unfused
			// softmax does (folded: 0·(1/0) = NaN too)
			o := out.F32[ost.row(b, qLo+i):]
			if !fold {
				vec.DivScalar(o[:dv], l[i])
			}
			if lse != nil {
				lse.F32[b*nq+qLo+i] = m[i] + float32(math.Log(float64(l[i])))
			}
		}
	})
	return out, lse, true, nil
}

// applyScoreOps applies the scale and mask ops, in graph order, to one block row of scores
// (batch b, query i, keys k0…).
func applyScoreOps(row []float32, ops []scoreOp, operands []bcastOperand, b, i, k0 int) {
	for _, op := range ops {
		switch op.kind {
		case '/':
			vec.DivScalar(row, op.c)
		case '*':
			vec.Scale(row, op.c)
		case '+':
			bo := &operands[op.input]
			if bo.zero != nil && bo.zero[b] {
				continue
			}
			off := bo.base[b] + i*bo.rs + k0*bo.cs
			if bo.cs == 1 {
				vec.Add(row, row, bo.t.F32[off:off+len(row)])
			} else {
				c := bo.t.F32[off]
				for j := range row {
					row[j] += c
				}
			}
		case 'r':
			// the relative bias of distances k0 − i … k0 + len(row) − 1 − i, contiguous
			bo := &operands[op.input]
			t := bo.rel[b]
			lo := k0 - i + bo.rs
			vec.Add(row, row, t[lo:lo+len(row)])
		case '-', 'x', 'd':
			// Subtracted biases, and scalings by a tensor: usually one value per matrix (a
			// per-head temperature) or per row, so the constant case is the vector one.
			bo := &operands[op.input]
			off := bo.base[b] + i*bo.rs + k0*bo.cs
			if bo.cs == 0 {
				c := bo.t.F32[off]
				switch op.kind {
				case '-':
					for j := range row {
						row[j] -= c
					}
				case 'x':
					vec.Scale(row, c)
				default:
					vec.DivScalar(row, c)
				}
				continue
			}
			src := bo.t.F32[off:]
			for j := range row {
				o := src[j*bo.cs]
				switch op.kind {
				case '-':
					row[j] -= o
				case 'x':
					row[j] *= o
				default:
					row[j] /= o
				}
			}
		case 'c', 'C':
			applyCausal(row, op.kind, op.c, op.cm, i, k0)
		case 'w', 'W':
			bo := &operands[op.input]
			if bo.replace != nil {
				runs, hi := bo.replace[b], k0+len(row)
				// The starts and ends increase together: the first value past k0 is the end of
				// the run k0 lies in (odd index) or the start of the first run after it.
				p, _ := slices.BinarySearch(runs, int32(k0+1))
				for r := p - p%2; r < len(runs) && int(runs[r]) < hi; r += 2 {
					from, to := max(int(runs[r]), k0), min(int(runs[r+1]), hi)
					copy(row[from-k0:to-k0], bo.fill)
				}
				continue
			}
			off := bo.base[b] + i*bo.rs + k0*bo.cs
			keep := op.kind == 'w' // Where(cond, s, c) keeps s where cond holds
			for j := range row {
				if bo.t.Bool[off+j*bo.cs] != keep {
					row[j] = op.c
				}
			}
		}
	}
}

// planRelBias tabulates the relative bias rb for each score matrix (batch×nq×nk): rel[b]
// holds the bias at distance j − i at index j − i + nq − 1, and rs is nq − 1. n is the
// sequence length the graph built the bias for; ok is false unless it is nq and nk (the
// bias is then the graph's n×n one) and the slopes broadcast to the matrices.
func planRelBias(rb *relBias, n *tensor.Tensor, batch []int, nq, nk int) (bcastOperand, bool) {
	if n == nil || n.DType != tensor.Int64 || len(n.I64) != 1 || n.I64[0] != int64(nq) || nq != nk {
		return bcastOperand{}, false
	}
	bo, ok := planOperand(rb.slopes, batch, nq, nk)
	if !ok || bo.rs != 0 || bo.cs != 0 {
		return bcastOperand{}, false
	}
	tables := map[int][]float32{}
	bo.rel = make([][]float32, len(bo.base))
	for b, off := range bo.base {
		if tables[off] == nil {
			tables[off] = rb.table(rb.slopes.F32[off], nq, nk, nil)
		}
		bo.rel[b] = tables[off]
	}
	bo.rs = nq - 1
	return bo, true
}
