//go:build amd64 && !purego

#include "textflag.h"

// func packBTrans32AVX512(dst, src *float32, idx *[16]int32, half, kc int)
//
// Packs one 32-column micro-panel of op(B) when B is stored transposed (n×k, row j of B is
// column j of op(B)): dst[p*32+j] = B[j, p] for p < kc, j < 32. src points at B[0, 0] of
// the panel, idx holds the element offsets j*ldb of rows 0..15, and half is the byte offset
// of row 16 (16*ldb*4). Each k step is two 16-lane gathers (rows 0-15 and 16-31 at column
// p) and two contiguous stores. A gather costs about half a cycle per element here; the
// scalar scatter loop it replaces costs about 1.5, and this packing runs once per element
// of B, so it shows on small-m products.
TEXT ·packBTrans32AVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ idx+16(FP), AX
	MOVQ half+24(FP), R8
	MOVQ kc+32(FP), CX
	VMOVDQU32 (AX), Z2
	ADDQ SI, R8 // R8: row 16 of the panel
	TESTQ CX, CX
	JZ done

loop:
	// A gather clears its mask as elements arrive, so set all 16 bits each time.
	KXNORW K1, K1, K1
	KXNORW K2, K2, K2
	VGATHERDPS (SI)(Z2*4), K1, Z0
	VGATHERDPS (R8)(Z2*4), K2, Z1
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ $4, SI
	ADDQ $4, R8
	ADDQ $128, DI
	DECQ CX
	JNZ loop

done:
	VZEROUPPER
	RET
