package cuda

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The kernels of kernels.cu run on the CPU here, through testdata/cuda_emul.h (blocks of OS
// threads, barriers for __syncthreads and the warp shuffles) and testdata/emul_main.cc,
// built with g++: a machine without a GPU checks their indexing, tiling and reductions
// against plain Go references. What only a GPU shows (NVRTC, timing, the memory model) is
// left to scripts/gpu-check.sh.

var (
	emulOnce sync.Once
	emulPath string
	emulErr  error
)

// emulator builds the emulator once per test binary, or skips the test without g++.
func emulator(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("g++ not found")
	}
	emulOnce.Do(func() {
		dir, err := os.MkdirTemp("", "zoo-cuda-emul-")
		if err != nil {
			emulErr = err
			return
		}
		emulPath = filepath.Join(dir, "emul")
		out, err := exec.Command(gxx, "-std=c++20", "-O1", "-pthread", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-parameter",
			"-o", emulPath, filepath.Join("testdata", "emul_main.cc")).CombinedOutput()
		if err != nil {
			emulErr = fmt.Errorf("build the kernel emulator: %v\n%s", err, out)
		}
	})
	if emulErr != nil {
		if strings.Contains(emulErr.Error(), "barrier") {
			t.Skipf("g++ lacks C++20's <barrier>: %v", emulErr)
		}
		t.Fatal(emulErr)
	}
	return emulPath
}

// emulParam is one kernel parameter for the emulator; F buffers come back after the run.
type emulParam struct {
	kind  byte // 'F', 'C', 'L', 'N', 'i', 'l', 'f', 'D', 'A'
	f     []float32
	c     []byte
	l     []int64
	iv    int64
	fv    float32
	d     desc
	a     attDesc
	index int // position among the F buffers
}

func pF(v []float32) *emulParam  { return &emulParam{kind: 'F', f: v} }
func pNull() *emulParam          { return &emulParam{kind: 'N'} }
func pI(v int) *emulParam        { return &emulParam{kind: 'i', iv: int64(v)} }
func pL(v int64) *emulParam      { return &emulParam{kind: 'l', iv: v} }
func pFv(v float32) *emulParam   { return &emulParam{kind: 'f', fv: v} }
func pD(d desc) *emulParam       { return &emulParam{kind: 'D', d: d} }
func pA(a attDesc) *emulParam    { return &emulParam{kind: 'A', a: a} }
func pLBuf(v []int64) *emulParam { return &emulParam{kind: 'L', l: v} }
func pCBuf(v []byte) *emulParam  { return &emulParam{kind: 'C', c: v} }
func f32bits(f float32) string   { return strconv.FormatUint(uint64(math.Float32bits(f)), 10) }
func ints(v []int64) []string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return s
}

// emulate runs kernel name over grid blocks of block threads and writes the float buffers'
// contents after the run back into the params.
func emulate(t *testing.T, name string, grid, block int, params ...*emulParam) {
	t.Helper()
	bin := emulator(t)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %d %d\n", name, grid, block)
	nf := 0
	for _, p := range params {
		switch p.kind {
		case 'F':
			p.index = nf
			nf++
			fmt.Fprintf(&sb, "F %d", len(p.f))
			for _, v := range p.f {
				sb.WriteString(" " + f32bits(v))
			}
		case 'C':
			fmt.Fprintf(&sb, "C %d", len(p.c))
			for _, v := range p.c {
				fmt.Fprintf(&sb, " %d", v)
			}
		case 'L':
			fmt.Fprintf(&sb, "L %d %s", len(p.l), strings.Join(ints(p.l), " "))
		case 'N':
			sb.WriteString("N")
		case 'i', 'l':
			fmt.Fprintf(&sb, "%c %d", p.kind, p.iv)
		case 'f':
			sb.WriteString("f " + f32bits(p.fv))
		case 'D':
			b, err := p.d.pack()
			if err != nil {
				t.Fatal(err)
			}
			sb.WriteString("D " + hex.EncodeToString(b))
		case 'A':
			sb.WriteString("A " + hex.EncodeToString(p.a.pack()))
		}
		sb.WriteByte('\n')
	}
	dir := t.TempDir()
	spec, out := filepath.Join(dir, "spec"), filepath.Join(dir, "out")
	if err := os.WriteFile(spec, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(bin, spec, out).CombinedOutput(); err != nil {
		t.Fatalf("emulate %s: %v\n%s", name, err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for _, p := range params {
		if p.kind != 'F' {
			continue
		}
		fields := strings.Fields(lines[p.index])
		if len(fields) != len(p.f) {
			t.Fatalf("emulate %s: buffer %d came back with %d values, want %d", name, p.index, len(fields), len(p.f))
		}
		for i, s := range fields {
			u, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			p.f[i] = math.Float32frombits(uint32(u))
		}
	}
}

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((rng.Float64()*2 - 1) * scale)
	}
	return v
}

// poison fills a buffer that a kernel must overwrite with NaN.
func poison(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

// attCase is one attention problem: q, k, v, y stored as [B, n, H, dh] (heads interleaved,
// as the projections leave them, so the kernels read strided rows) or [B, H, n, dh].
type attCase struct {
	name             string
	b, h, nq, nk, dh int
	interleaved      bool
	mask, bias       bool // a key-padding mask [B,1,1,nk] of 0 / -inf, a bias [1,H,nq,nk]
	maskAll          bool // batch 0's keys all masked (its outputs are NaN, as unfused)
	kernel           string
	grid             int
}

func (c attCase) strides(n int) [4]int64 {
	if c.interleaved {
		return [4]int64{int64(n * c.h * c.dh), int64(c.dh), int64(c.h * c.dh), 1}
	}
	return [4]int64{int64(c.h * n * c.dh), int64(n * c.dh), int64(c.dh), 1}
}

func TestKernelsEmulatedAttention(t *testing.T) {
	cases := []attCase{
		{name: "t64", b: 2, h: 2, nq: 70, nk: 45, dh: 64, interleaved: true, mask: true, bias: true, kernel: "zoo_attention_t64", grid: 3},
		{name: "t64-nomask", b: 1, h: 2, nq: 64, nk: 64, dh: 64, kernel: "zoo_attention_t64", grid: 2},
		{name: "t32", b: 2, h: 3, nq: 33, nk: 97, dh: 32, mask: true, maskAll: true, kernel: "zoo_attention_t32", grid: 4},
		{name: "warp-dh16", b: 2, h: 2, nq: 9, nk: 13, dh: 16, interleaved: true, mask: true, bias: true, kernel: "zoo_attention", grid: 2},
		{name: "warp-dh100", b: 1, h: 2, nq: 5, nk: 7, dh: 100, mask: true, maskAll: true, kernel: "zoo_attention", grid: 3},
		{name: "warp-dh64", b: 2, h: 1, nq: 6, nk: 40, dh: 64, interleaved: true, bias: true, kernel: "zoo_attention", grid: 1},
		// The bf16 tensor-core kernels: the reference rounds q, k and v to bf16 (the scores'
		// probabilities are rounded in the kernel only, hence the looser tolerance).
		{name: "bf16-d64", b: 2, h: 2, nq: 70, nk: 130, dh: 64, interleaved: true, mask: true, bias: true, kernel: "zoo_attention_bf16_d64", grid: 3},
		{name: "bf16-d32", b: 2, h: 3, nq: 33, nk: 97, dh: 32, mask: true, maskAll: true, kernel: "zoo_attention_bf16_d32", grid: 4},
		{name: "bf16-d64-mask", b: 2, h: 2, nq: 150, nk: 100, dh: 64, interleaved: true, mask: true, kernel: "zoo_attention_bf16_d64", grid: 2},
		{name: "bf16-d64-n1", b: 1, h: 2, nq: 1, nk: 1, dh: 64, kernel: "zoo_attention_bf16_d64", grid: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.nq), uint64(c.nk)))
			q := randF32(rng, c.b*c.nq*c.h*c.dh, 1)
			k := randF32(rng, c.b*c.nk*c.h*c.dh, 1)
			v := randF32(rng, c.b*c.nk*c.h*c.dh, 1)
			scale := float32(1 / math.Sqrt(float64(c.dh)))
			a := attDesc{bh: int64(c.b * c.h), heads: int64(c.h), nq: int64(c.nq), nk: int64(c.nk), dh: int64(c.dh), scale: scale}
			a.st[0], a.st[3] = c.strides(c.nq), c.strides(c.nq)
			a.st[1], a.st[2] = c.strides(c.nk), c.strides(c.nk)
			var biases [][]float32
			var bst [][4]int64
			if c.mask {
				m := make([]float32, c.b*c.nk)
				for i := range m {
					if (c.maskAll && i < c.nk) || rng.IntN(4) == 0 {
						m[i] = float32(math.Inf(-1))
					}
				}
				biases, bst = append(biases, m), append(bst, [4]int64{int64(c.nk), 0, 0, 1})
			}
			if c.bias {
				biases = append(biases, randF32(rng, c.h*c.nq*c.nk, 2))
				bst = append(bst, [4]int64{0, int64(c.nq * c.nk), int64(c.nk), 1})
			}
			a.nbias = int64(len(biases))
			bp := []*emulParam{pNull(), pNull()}
			for i := range biases {
				bp[i] = pF(biases[i])
				a.st[4+i] = bst[i]
			}
			bf16 := strings.HasPrefix(c.kernel, "zoo_attention_bf16")
			y := pF(poison(c.b * c.nq * c.h * c.dh))
			block := 128
			switch {
			case c.kernel == "zoo_attention":
				block = 64
			case bf16:
				block = 256
			}
			emulate(t, c.kernel, c.grid, block, y, pF(q), pF(k), pF(v), bp[0], bp[1], pA(a))
			tol := 1e-5
			if bf16 {
				for _, x := range [][]float32{q, k, v} {
					for i := range x {
						x[i] = roundBF16(x[i])
					}
				}
				tol = 4e-3
			}
			// The reference, in float64.
			at := func(x []float32, st [4]int64, bb, hh, i, d int) float64 {
				return float64(x[int64(bb)*st[0]+int64(hh)*st[1]+int64(i)*st[2]+int64(d)])
			}
			worst := 0.0
			for bb := 0; bb < c.b; bb++ {
				for hh := 0; hh < c.h; hh++ {
					for i := 0; i < c.nq; i++ {
						s := make([]float64, c.nk)
						mx := math.Inf(-1)
						for j := range s {
							dot := 0.0
							for d := 0; d < c.dh; d++ {
								dot += at(q, a.st[0], bb, hh, i, d) * at(k, a.st[1], bb, hh, j, d)
							}
							s[j] = dot * float64(scale)
							for bi := range biases {
								s[j] += float64(biases[bi][int64(bb)*bst[bi][0]+int64(hh)*bst[bi][1]+int64(i)*bst[bi][2]+int64(j)*bst[bi][3]])
							}
							mx = math.Max(mx, s[j])
						}
						sum := 0.0
						for j := range s {
							s[j] = math.Exp(s[j] - mx)
							sum += s[j]
						}
						for d := 0; d < c.dh; d++ {
							want := 0.0
							for j := range s {
								want += s[j] / sum * at(v, a.st[2], bb, hh, j, d)
							}
							got := at(y.f, a.st[3], bb, hh, i, d)
							if math.IsInf(mx, -1) { // every key masked: NaN, as the unfused softmax gives
								if !math.IsNaN(got) {
									t.Fatalf("b%d h%d row %d: every key masked, got %v, want NaN", bb, hh, i, got)
								}
								continue
							}
							diff := math.Abs(got-want) / math.Max(1, math.Abs(want))
							if !(diff <= tol) {
								t.Fatalf("b%d h%d row %d col %d: got %v, want %v", bb, hh, i, d, got, want)
							}
							worst = math.Max(worst, diff)
						}
					}
				}
			}
			t.Logf("%s: max rel diff %.2g", c.kernel, worst)
		})
	}
}

// TestKernelsEmulatedElementwise runs the strided kernels (zoo_binary, zoo_copy) over
// broadcasts and transposes with one, two and three dimensions after coalescing, and the
// row kernels (zoo_softmax, zoo_layernorm), against Go.
func TestKernelsEmulatedElementwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t.Run("binary", func(t *testing.T) {
		for _, c := range []struct{ a, b []int }{
			{[]int{3, 5, 7}, []int{3, 5, 7}}, // one dimension
			{[]int{4, 6, 8}, []int{8}},       // bias over rows: two
			{[]int{2, 3, 4, 5}, []int{2, 1, 1, 5}},
			{[]int{6, 5}, []int{}}, // scalar
		} {
			shape := c.a
			av, bv := randF32(rng, prod(c.a), 3), randF32(rng, prod(c.b), 3)
			d := coalesce(shape, broadcastStrides(c.a, shape), broadcastStrides(c.b, shape))
			y := pF(poison(prod(shape)))
			emulate(t, "zoo_binary", 2, 64, y, pF(av), pF(bv), pL(int64(prod(shape))), pI(1 /* B_SUB */), pD(d))
			bs := broadcastStrides(c.b, shape)
			for i := range y.f {
				off, rem := int64(0), i
				for dim := len(shape) - 1; dim >= 0; dim-- {
					off += int64(rem%shape[dim]) * bs[dim]
					rem /= shape[dim]
				}
				if want := av[i] - bv[off]; y.f[i] != want {
					t.Fatalf("%v - %v: element %d = %v, want %v", c.a, c.b, i, y.f[i], want)
				}
			}
		}
	})
	t.Run("binary-rows", func(t *testing.T) {
		// rowsForm's cases: a full operand, a bias down the rows, a block of rows repeated;
		// four columns per thread and one; with and without the ReLU.
		for _, c := range []struct {
			a, b []int
			op   int
			relu bool
			res  bool
		}{
			{[]int{3, 5, 8}, []int{8}, 0, true, false},        // bias + ReLU, vectorised
			{[]int{3, 5, 7}, []int{1, 1, 7}, 1, false, false}, // Sub of a bias, 7 columns: scalar
			{[]int{2, 6, 4}, []int{6, 4}, 3, true, false},     // Div by a block of rows
			{[]int{4, 12}, []int{4, 12}, 2, false, false},     // same shape
			{[]int{5, 3}, []int{3}, 0, true, false},           // scalar path with ReLU
			{[]int{3, 5, 8}, []int{8}, 0, false, true},        // bias + residual, vectorised
			{[]int{3, 5, 7}, []int{7}, 0, false, true},        // bias + residual, scalar
		} {
			rows, cols, brows, ok := rowsForm(c.a, c.b)
			if !ok {
				t.Fatalf("rowsForm(%v, %v) not ok", c.a, c.b)
			}
			av, bv := randF32(rng, prod(c.a), 3), randF32(rng, prod(c.b), 3)
			av[0] = float32(math.NaN())
			y := pF(poison(prod(c.a)))
			vec, relu := 0, 0
			if cols%4 == 0 {
				vec = 1
			}
			if c.relu {
				relu = 1
			}
			res, rv := pNull(), []float32(nil)
			if c.res {
				rv = randF32(rng, prod(c.a), 3)
				res = pF(rv)
			}
			emulate(t, "zoo_binary_rows", 2, 64, y, pF(av), pF(bv), res, pL(int64(rows)), pL(int64(cols)), pL(int64(brows)), pI(c.op), pI(relu), pI(vec))
			for i := range y.f {
				x, w := float64(av[i]), float64(bv[i%len(bv)])
				want := [...]float64{x + w, x - w, x * w, x / w}[c.op]
				if c.res {
					// The two unfused Adds: each rounds to float32.
					want = float64(float32(float32(want) + rv[i]))
				}
				if c.relu && !(want > 0) {
					want = 0 // the unfused Relu's x > 0 ? x : 0, NaN included
				}
				if got := float64(y.f[i]); float32(got) != float32(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
					t.Fatalf("%v op%d %v relu=%v: element %d = %v, want %v", c.a, c.op, c.b, c.relu, i, got, want)
				}
			}
		}
		if _, _, _, ok := rowsForm([]int{2, 3, 4}, []int{2, 1, 4}); ok {
			t.Error("rowsForm took a broadcast in the middle")
		}
	})
	t.Run("to-bf16", func(t *testing.T) {
		for _, n := range []int{64, 7} {
			x := randF32(rng, n, 3)
			x[1] = float32(math.Inf(-1))
			x[2] = 1 + 1.0/256 // a tie: to even, 1
			x[3] = 1 + 3.0/256 // a tie: to even, 1 + 4/256
			y := pF(poison((n + 1) / 2))
			vec := 0
			if n%4 == 0 {
				vec = 1
			}
			emulate(t, "zoo_to_bf16", 2, 32, y, pF(x), pL(int64(n)), pI(vec))
			for i, v := range x {
				bits := math.Float32bits(y.f[i/2]) >> (16 * (i % 2)) & 0xffff
				if got, want := math.Float32frombits(bits<<16), roundBF16(v); got != want {
					t.Fatalf("n=%d element %d: bf16(%v) = %v, want %v", n, i, v, got, want)
				}
			}
		}
	})
	t.Run("unary4", func(t *testing.T) {
		x := randF32(rng, 64, 2)
		y := pF(poison(64))
		emulate(t, "zoo_unary4", 2, 32, y, pF(x), pL(16), pI(6 /* U_TANH */), pFv(1))
		for i, v := range x {
			if math.Abs(float64(y.f[i])-math.Tanh(float64(v))) > 1e-6 {
				t.Fatalf("tanh element %d = %v, want %v", i, y.f[i], math.Tanh(float64(v)))
			}
		}
	})
	t.Run("copy-transpose", func(t *testing.T) {
		shape := []int{2, 3, 4, 5} // y = transpose(x, 0 2 1 3) of x [2 4 3 5]
		xs := []int{2, 4, 3, 5}
		x := randF32(rng, prod(xs), 1)
		cs := contiguous(xs)
		st := []int64{cs[0], cs[2], cs[1], cs[3]}
		d := coalesce(shape, st, contiguous(shape))
		y := pF(poison(prod(shape)))
		emulate(t, "zoo_copy", 3, 64, y, pL(0), pF(x), pL(0), pL(int64(prod(shape))), pD(d))
		i := 0
		for a := 0; a < 2; a++ {
			for b := 0; b < 3; b++ {
				for c := 0; c < 4; c++ {
					for e := 0; e < 5; e++ {
						if want := x[((a*4+c)*3+b)*5+e]; y.f[i] != want {
							t.Fatalf("element %d = %v, want %v", i, y.f[i], want)
						}
						i++
					}
				}
			}
		}
	})
	t.Run("softmax-layernorm", func(t *testing.T) {
		const rows, cols = 5, 300
		x := randF32(rng, rows*cols, 4)
		y := pF(poison(rows * cols))
		emulate(t, "zoo_softmax", 2, 256, y, pF(x), pL(rows), pL(cols), pL(1))
		g, b := randF32(rng, cols, 1), randF32(rng, cols, 1)
		ln, mean, rstd := pF(poison(rows*cols)), pF(poison(rows)), pF(poison(rows))
		emulate(t, "zoo_layernorm", 3, 64, ln, mean, rstd, pF(x), pF(g), pF(b), pL(rows), pL(cols), pL(cols), pL(cols), pFv(1e-5))
		lnw, meanw, rstdw := pF(poison(rows*cols)), pF(poison(rows)), pF(poison(rows))
		emulate(t, "zoo_layernorm_warp", 1, 64, lnw, meanw, rstdw, pF(x), pF(g), pF(b), pL(rows), pL(cols), pL(cols), pL(cols), pFv(1e-5))
		for i := range lnw.f {
			if math.Abs(float64(lnw.f[i]-ln.f[i])) > 1e-5 {
				t.Fatalf("zoo_layernorm_warp element %d = %v, zoo_layernorm %v", i, lnw.f[i], ln.f[i])
			}
		}
		for i := range meanw.f {
			if math.Abs(float64(meanw.f[i]-mean.f[i])) > 1e-6 || math.Abs(float64(rstdw.f[i]-rstd.f[i])) > 1e-5 {
				t.Fatalf("zoo_layernorm_warp row %d stats %v %v, zoo_layernorm %v %v", i, meanw.f[i], rstdw.f[i], mean.f[i], rstd.f[i])
			}
		}
		for r := 0; r < rows; r++ {
			row := x[r*cols : (r+1)*cols]
			mx, sum, mu, vr := math.Inf(-1), 0.0, 0.0, 0.0
			for _, v := range row {
				mx = math.Max(mx, float64(v))
				mu += float64(v) / cols
			}
			for _, v := range row {
				sum += math.Exp(float64(v) - mx)
				vr += (float64(v) - mu) * (float64(v) - mu) / cols
			}
			for j, v := range row {
				if want := math.Exp(float64(v)-mx) / sum; math.Abs(float64(y.f[r*cols+j])-want) > 1e-6 {
					t.Fatalf("softmax row %d col %d = %v, want %v", r, j, y.f[r*cols+j], want)
				}
				want := (float64(v)-mu)/math.Sqrt(vr+1e-5)*float64(g[j]) + float64(b[j])
				if math.Abs(float64(ln.f[r*cols+j])-want) > 1e-4 {
					t.Fatalf("layernorm row %d col %d = %v, want %v", r, j, ln.f[r*cols+j], want)
				}
			}
			if math.Abs(float64(mean.f[r])-mu) > 1e-5 || math.Abs(float64(rstd.f[r])-1/math.Sqrt(vr+1e-5)) > 1e-4 {
				t.Fatalf("layernorm row %d: mean %v rstd %v, want %v %v", r, mean.f[r], rstd.f[r], mu, 1/math.Sqrt(vr+1e-5))
			}
		}
	})
}

// roundBF16 rounds x to bf16 (to nearest, ties to even), as f2bf in kernels.cu does.
func roundBF16(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return x
	}
	u = (u + 0x7fff + (u>>16)&1) &^ 0xffff
	return math.Float32frombits(u)
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}
