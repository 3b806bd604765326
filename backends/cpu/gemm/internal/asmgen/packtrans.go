package main

import (
	"bytes"
	"fmt"
)

// emitPackTrans writes packBTrans32T16AVX512: packBTrans32AVX512 (pack_amd64.s) without
// gathers, for kc a multiple of 16.
func emitPackTrans(w *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, "\t"+format+"\n", args...) }
	fmt.Fprint(w, `
// func packBTrans32T16AVX512(dst, src *float32, ldb4, blocks int)
//
// packBTrans32AVX512 (pack_amd64.s) without gathers, for kc a multiple of 16 (blocks =
// kc/16): per block of 16 k steps and each half of the panel's 32 rows of B, the 16 rows'
// 16 values are loaded (ldb4 is B's row stride in bytes), transposed in registers and stored
// as 16 k steps of 16 columns: dst[p*32+j] = B[j, p]. Zen 5's gathers cost 0.63 ns a value
// here; TestPackBTransFast holds this to the Go loop.
TEXT ·packBTrans32T16AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldb4+16(FP), BX
	MOVQ blocks+24(FP), CX
	TESTQ CX, CX
	JZ t16done
t16loop:
	MOVQ SI, R10
`)
	for half := 0; half < 2; half++ {
		p("// rows %d-%d of the panel", 16*half, 16*half+15)
		for i := 0; i < 16; i++ {
			p("VMOVUPS (R10), Z%d", i)
			p("ADDQ BX, R10")
		}
		transpose16(p)
		for c := 0; c < 16; c++ {
			p("VMOVUPS Z%d, %d(DI)", c, c*128+half*64)
		}
	}
	fmt.Fprint(w, `	ADDQ $64, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ t16loop
t16done:
	VZEROUPPER
	RET
`)
}

// emitTranspose writes transpose16AVX512, gemm.Transpose's vector code: blocks 16×16
// blocks side by side along a strip of 16 rows of src, each loaded, transposed in registers
// and stored as 16 rows of dst.
func emitTranspose(w *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, "\t"+format+"\n", args...) }
	fmt.Fprint(w, `
// func transpose16AVX512(dst, src *float32, lds4, ldd4, blocks int)
//
// dst[j*ldd+i] = src[i*lds+j] for the 16 rows i of a strip of src and its first 16·blocks
// columns j (lds4 and ldd4 are the row strides in bytes): per block, src's 16 rows of 16
// values are loaded, transposed in registers (transpose16) and stored as 16 rows of dst, so
// both sides move whole 64-byte rows. TestTranspose holds it to transposeGo.
TEXT ·transpose16AVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds4+16(FP), BX
	MOVQ ldd4+24(FP), DX
	MOVQ blocks+32(FP), CX
	TESTQ CX, CX
	JZ tr16done
tr16loop:
	MOVQ SI, R10
`)
	for i := 0; i < 16; i++ {
		p("VMOVUPS (R10), Z%d", i)
		p("ADDQ BX, R10")
	}
	transpose16(p)
	for c := 0; c < 16; c++ {
		p("VMOVUPS Z%d, (DI)", c)
		p("ADDQ DX, DI")
	}
	fmt.Fprint(w, `	ADDQ $64, SI
	DECQ CX
	JNZ tr16loop
tr16done:
	VZEROUPPER
	RET
`)
}

// transpose16 emits the transpose of the 16×16 matrix whose rows are Z0–Z15 into its
// columns, Z0–Z15 again (Z16–Z31 are scratch). Row r's value c is r[c]; a 128-bit lane L of a
// register holds its values 4L…4L+3.
//
//  1. VUNPCKLPS/VUNPCKHPS of rows 2i, 2i+1: per lane, their values 0 and 1 interleaved, and
//     2 and 3.
//  2. VUNPCKLPD/VUNPCKHPD of those pairs: register 4i+e holds, in lane L, rows 4i…4i+3 at
//     value 4L+e.
//  3. VSHUFF32X4 $0x88 (lanes 0 and 2 of each source) and $0xDD (lanes 1 and 3) pair row
//     groups 0 with 1 and 2 with 3,
//  4. and again across the two halves: column e, 4+e, 8+e and 12+e, each of 16 rows.
func transpose16(p func(string, ...any)) {
	for i := 0; i < 8; i++ {
		p("VUNPCKLPS Z%d, Z%d, Z%d", 2*i+1, 2*i, 16+2*i)
		p("VUNPCKHPS Z%d, Z%d, Z%d", 2*i+1, 2*i, 17+2*i)
	}
	for i := 0; i < 4; i++ {
		a := 16 + 4*i
		p("VUNPCKLPD Z%d, Z%d, Z%d", a+2, a, 4*i)
		p("VUNPCKHPD Z%d, Z%d, Z%d", a+2, a, 4*i+1)
		p("VUNPCKLPD Z%d, Z%d, Z%d", a+3, a+1, 4*i+2)
		p("VUNPCKHPD Z%d, Z%d, Z%d", a+3, a+1, 4*i+3)
	}
	for e := 0; e < 4; e++ {
		p("VSHUFF32X4 $0x88, Z%d, Z%d, Z%d", 4+e, e, 16+e)
		p("VSHUFF32X4 $0xDD, Z%d, Z%d, Z%d", 4+e, e, 20+e)
		p("VSHUFF32X4 $0x88, Z%d, Z%d, Z%d", 12+e, 8+e, 24+e)
		p("VSHUFF32X4 $0xDD, Z%d, Z%d, Z%d", 12+e, 8+e, 28+e)
	}
	for e := 0; e < 4; e++ {
		p("VSHUFF32X4 $0x88, Z%d, Z%d, Z%d", 24+e, 16+e, e)
		p("VSHUFF32X4 $0xDD, Z%d, Z%d, Z%d", 24+e, 16+e, 8+e)
		p("VSHUFF32X4 $0x88, Z%d, Z%d, Z%d", 28+e, 20+e, 4+e)
		p("VSHUFF32X4 $0xDD, Z%d, Z%d, Z%d", 28+e, 20+e, 12+e)
	}
}
