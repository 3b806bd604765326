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

// func packARowsAVX512(dst, src *float32, idx *[16]int32, lanes, mr, kc int, alpha float32)
//
// Packs one micro-panel of a row-major op(A): dst[p*mr+i] = alpha*A[i, p] for p < kc and
// i < lanes, and 0 for lanes <= i < mr (mr <= 16). src points at A[0, 0] of the panel and
// idx holds the element offsets i*lda. Each k step is one masked gather down the panel's
// rows, one multiply (exact when alpha is 1) and one masked store of mr values.
TEXT ·packARowsAVX512(SB), NOSPLIT, $0-52
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ idx+16(FP), AX
	MOVQ lanes+24(FP), BX
	MOVQ mr+32(FP), DX
	MOVQ kc+40(FP), CX
	VBROADCASTSS alpha+48(FP), Z3
	VMOVDQU32 (AX), Z2
	// K3: the low lanes bits (gather mask), K4: the low mr bits (store mask).
	MOVL $1, R9
	SHLXL BX, R9, R10
	DECL R10
	KMOVW R10, K3
	SHLXL DX, R9, R11
	DECL R11
	KMOVW R11, K4
	SHLQ $2, DX // DX: bytes per k step of dst
	TESTQ CX, CX
	JZ done

loop:
	VPXORD Z0, Z0, Z0
	KMOVW K3, K1
	VGATHERDPS (SI)(Z2*4), K1, Z0
	VMULPS Z3, Z0, K3, Z0
	VMOVUPS Z0, K4, (DI)
	ADDQ $4, SI
	ADDQ DX, DI
	DECQ CX
	JNZ loop

done:
	VZEROUPPER
	RET

// func prefetchL2(p *float32, lines int)
//
// Issues PREFETCHT1 for lines consecutive 64-byte lines from p: the next packed B
// micro-panel is fetched into L2 while the current one is being used.
TEXT ·prefetchL2(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ lines+8(FP), CX
	TESTQ CX, CX
	JLE pdone

ploop:
	PREFETCHT1 (SI)
	ADDQ $64, SI
	DECQ CX
	JNZ ploop

pdone:
	RET

// func packBRowsAVX(dst, src *float32, ldb, rows, pieces, nr, stride int)
//
// Deals rows of a row-major op(B) out to packed micro-panels: for p < rows and q < pieces,
// the nr values src[p*ldb+q*nr:][:nr] go to dst[q*stride+p*nr:]. nr must be a positive
// multiple of 8; ldb, nr and stride are in elements. It is packB's copy loop without a
// runtime.memmove call per 64-128-byte piece, which cost a fifth of a 128×2048×512
// product's time. Reads walk each row in order, so the hardware prefetcher follows them.
TEXT ·packBRowsAVX(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldb+16(FP), R8
	MOVQ rows+24(FP), CX
	MOVQ pieces+32(FP), R9
	MOVQ nr+40(FP), R10
	MOVQ stride+48(FP), R11
	SHLQ $2, R8
	SHLQ $2, R10
	SHLQ $2, R11
	TESTQ CX, CX
	JZ rdone
	TESTQ R9, R9
	JZ rdone

rrow:
	MOVQ SI, AX // source of this row's piece
	MOVQ DI, BX // its destination
	MOVQ R9, DX

rpiece:
	XORQ R12, R12

rchunk:
	VMOVUPS (AX)(R12*1), Y0
	VMOVUPS Y0, (BX)(R12*1)
	ADDQ $32, R12
	CMPQ R12, R10
	JLT rchunk
	ADDQ R10, AX
	ADDQ R11, BX
	DECQ DX
	JNZ rpiece
	ADDQ R8, SI
	ADDQ R10, DI
	DECQ CX
	JNZ rrow

rdone:
	VZEROUPPER
	RET
