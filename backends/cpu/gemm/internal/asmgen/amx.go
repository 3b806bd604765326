package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Go's assembler has no AMX mnemonics: the generator encodes them (VEX, map 0F38, W0, L0).
// Tile registers are 0-7; general registers use the hardware numbering (AX 0, CX 1, DX 2,
// BX 3, SP 4, BP 5, SI 6, DI 7, R8-R15 8-15).

// Hardware numbers of the general registers the AMX kernel addresses memory through.
const (
	regBX  = 3
	regR9  = 9
	regR10 = 10
	regR11 = 11
	regR12 = 12
	regR13 = 13
)

// vexTileMem returns an AMX instruction with a memory operand: reg in ModRM.reg, the
// address base + index + disp (index −1: none), with a disp8 or disp32 always (so that R13
// as a base needs no special case) and a SIB byte where there is an index or base is SP or
// R12. pp is the prefix (0: none, 1: 66, 2: F3, 3: F2).
func vexTileMem(pp, opcode, reg, base, index, disp int) []byte {
	bit3 := func(r int) int { return r >> 3 & 1 }
	xb := 0
	if index >= 0 {
		xb = bit3(index)
	}
	out := []byte{0xC4, byte((1-bit3(reg))<<7 | (1-xb)<<6 | (1-bit3(base))<<5 | 0b00010), byte(0b1111<<3 | pp), byte(opcode)}
	mod := 1
	if disp < -128 || disp > 127 {
		mod = 2
	}
	if index < 0 && base&7 != 4 {
		out = append(out, byte(mod<<6|(reg&7)<<3|base&7))
	} else {
		idx := 4 // none
		if index >= 0 {
			idx = index & 7
		}
		out = append(out, byte(mod<<6|(reg&7)<<3|4), byte(idx<<3|base&7))
	}
	if mod == 1 {
		return append(out, byte(int8(disp)))
	}
	return binary.LittleEndian.AppendUint32(out, uint32(int32(disp)))
}

// ldtilecfg returns LDTILECFG [base]: the 64-byte tile configuration at base.
func ldtilecfg(base int) []byte { return vexTileMem(0, 0x49, 0, base, -1, 0) }

// tileloadd returns TILELOADD tmm, [base + index·1 + disp]: the tile's rows from base+disp,
// index bytes apart.
func tileloadd(tmm, base, index, disp int) []byte {
	return vexTileMem(3, 0x4B, tmm, base, index, disp)
}

// tilestored returns TILESTORED [base + index·1 + disp], tmm.
func tilestored(tmm, base, index, disp int) []byte {
	return vexTileMem(2, 0x4B, tmm, base, index, disp)
}

// tilezero returns TILEZERO tmm.
func tilezero(tmm int) []byte { return []byte{0xC4, 0xE2, 0x7B, 0x49, byte(0xC0 | tmm<<3)} }

// tilerelease returns TILERELEASE, which puts the tiles back in their initial state (and
// so lets the OS skip saving them).
func tilerelease() []byte { return []byte{0xC4, 0xE2, 0x78, 0x49, 0xC0} }

// tdpbusd returns TDPBUSD acc, x, y: for each of acc's rows i and int32 columns j,
// acc[i][j] += Σ_k u8(x[i] byte k)·s8(y[k/4] byte 4j + k%4), exactly (no saturation).
func tdpbusd(acc, x, y int) []byte {
	return []byte{0xC4, 0xE2, byte((^y&15)<<3 | 1), 0x5E, byte(0xC0 | acc<<3 | x)}
}

// amxKernel is the shape of an AMX-INT8 kernel: rt×ct tiles of sums (16 rows × 16 int32
// columns each), rt tiles of A and ct of B: eight in all.
type amxKernel struct {
	name   string
	rt, ct int
}

// amxInt8 is the AMX kernel generated. 2×2 ran 700 GOP/s against a 1×4 shape's 560
// (BenchmarkInt8, M4096 N768 K768, Xeon with AMX, 2 threads): a tile of A serves two of
// B, and B's panel of 32 columns stays in L1 while the row tiles pass over it.
var amxInt8 = amxKernel{name: "i8KernelAMX", rt: 2, ct: 2}

// emit writes the kernel: the int8 kernel contract (see int8Header) over h rows (1 to
// 16·rt, an argument: the tile configuration takes it) and NR = 16·ct columns, for mt tiles
// of h rows one under the other (A's and C's rows, rs and rz going on by h) and np panels of
// NR columns side by side (B going on by panel bytes; C, cs, csum and bias by NR): one tile
// configuration for them all, which costs as much as a tile's products with k = 768.
//
// The whole blocks of 16 k steps run on the tiles: A's rows are tiles of up to 16 rows × 64
// bytes read in place (row stride lda), and the 16 k steps of each 16 columns of B one of
// 16 rows × 64 bytes (row stride NR·4); TDPBUSD adds their products into the tiles of sums.
// The sums are stored to the frame, then each row is finished with AVX512-VNNI (the k
// steps after the last whole block, which no tile can take without reading past them) and
// stored as the other kernels store.
//
// Every tile instruction runs inside this one function, which Go never preempts or moves
// between threads midway (assembly has no safe points), and the tiles are released before
// it returns.
func (k amxKernel) emit(w *bytes.Buffer) {
	name, rt, ct := k.name, k.rt, k.ct
	nr := 16 * ct
	bStep := 4 * nr // bytes of B per k step
	nc := rt * ct
	if nc+rt+ct > 8 || rt > 2 {
		panic(name + ": more than eight tiles, or more than two row tiles (the rows of each are set apart below)")
	}
	aTile := func(i int) int { return nc + i }
	bTile := func(j int) int { return nc + rt + j }
	p := func(format string, args ...any) { fmt.Fprintf(w, "\t"+format+"\n", args...) }
	label := func(s string) { fmt.Fprintf(w, "%s_%s:\n", name, s) }
	bl := func(code []byte, intel string) { bytesLine(w, code, intel) }
	// The frame: the loop's state at the hardware SP, then 64 bytes of tile configuration
	// at a 64-byte boundary, then the sums (16·rt rows of NR int32).
	const (
		locA     = "0(SP)"  // A's rows of the tile
		locB     = "8(SP)"  // the panel of B
		locC     = "16(SP)" // C's rows of the tile
		locCP    = "24(SP)" // C's rows of the panel's first tile
		locRow   = "32(SP)" // the tile's first row · 4: its offset in rs and rz
		locCol   = "40(SP)" // the panel's first column · 4: its offset in cs, csum, bias
		locTiles = "48(SP)" // tiles left in the panel
		locPanel = "56(SP)" // panels left
	)
	fmt.Fprintf(w, "\n// func %s(h, kg int, a *uint8, b *int8, c *float32, ldc, flags int, beta float32, lda int, rs *float32, rz *int32, cs *float32, csum *int32, bias *float32, mt, np, panel int)\n", name)
	fmt.Fprintf(w, "// AMX-INT8, mt×np tiles of h×%d (h ≤ %d): sums in tmm0–tmm%d, A in tmm%d–tmm%d, B in tmm%d–tmm%d; the tail and store in AVX-512.\n",
		nr, 16*rt, nc-1, nc, nc+rt-1, nc+rt, nc+rt+ct-1)
	// 64 bytes of state, room to align up to 64 more, the configuration, the sums.
	fmt.Fprintf(w, "TEXT ·%s(SB), $%d-136\n", name, 64+64+64+16*rt*bStep)
	frame := func() {
		p("LEAQ 127(SP), R9")
		p("ANDQ $~63, R9 // the tile configuration; the sums follow it")
	}
	for _, c := range [][2]string{{"a+16(FP)", locA}, {"b+24(FP)", locB}, {"c+32(FP)", locC}, {"c+32(FP)", locCP}, {"mt+112(FP)", locTiles}, {"np+120(FP)", locPanel}} {
		p("MOVQ %s, AX", c[0])
		p("MOVQ AX, %s", c[1])
	}
	p("MOVQ $0, %s", locRow)
	p("MOVQ $0, %s", locCol)
	p("MOVQ h+0(FP), AX")
	p("MOVQ kg+8(FP), CX")
	frame()
	p("SHRQ $4, CX // whole blocks of 16 k steps")
	p("JZ %s_tile", name)
	p("VPXORD Z0, Z0, Z0")
	p("VMOVDQU64 Z0, (R9)")
	p("MOVB $1, (R9) // palette 1")
	// The rows of the first row tile (R12) and of the second (R13, 0 when h ≤ 16).
	p("MOVQ $16, R12")
	p("CMPQ AX, R12")
	p("CMOVQLT AX, R12")
	p("MOVQ AX, R13")
	p("SUBQ R12, R13")
	rowsOf := func(i int) string { return []string{"R12", "R13"}[i] }
	for i := 0; i < rt; i++ {
		if i > 0 {
			// A tile left out of the configuration (rows and bytes 0) must not be touched.
			p("TESTQ R13, R13")
			p("JZ %s_cfg%d", name, i)
		}
		for j := 0; j < ct; j++ {
			t := i*ct + j
			p("MOVW $64, %d(R9) // tmm%d: sums of row tile %d, 16 columns", 16+2*t, t, i)
			p("MOVB %s, %d(R9)", rowsOf(i), 48+t)
		}
		p("MOVW $64, %d(R9) // tmm%d: A's row tile %d, 16 k steps", 16+2*aTile(i), aTile(i), i)
		p("MOVB %s, %d(R9)", rowsOf(i), 48+aTile(i))
		if i > 0 {
			label(fmt.Sprintf("cfg%d", i))
		}
	}
	for j := 0; j < ct; j++ {
		p("MOVW $64, %d(R9) // tmm%d: B, 16 k steps × 16 columns", 16+2*bTile(j), bTile(j))
		p("MOVB $16, %d(R9)", 48+bTile(j))
	}
	bl(ldtilecfg(regR9), "LDTILECFG [r9]")

	// A tile: its sums from the whole blocks into the frame.
	label("tile")
	p("MOVQ h+0(FP), AX")
	p("MOVQ kg+8(FP), CX")
	p("MOVQ %s, SI", locA)
	p("MOVQ lda+64(FP), BX")
	frame()
	p("SHRQ $4, CX")
	p("JZ %s_rows", name)
	for i := 0; i < rt; i++ {
		if i > 0 {
			p("CMPQ AX, $16")
			p("JLE %s_zeroed", name)
		}
		for j := 0; j < ct; j++ {
			bl(tilezero(i*ct+j), fmt.Sprintf("TILEZERO tmm%d", i*ct+j))
		}
	}
	if rt > 1 {
		label("zeroed")
	}
	p("MOVQ $%d, R11 // B's row stride: a k step", bStep)
	p("MOVQ BX, R10")
	p("SHLQ $4, R10")
	p("ADDQ SI, R10 // A's row 16")
	p("MOVQ SI, R12")
	p("MOVQ %s, R13", locB)
	aBase := []int{regR12, regR10}
	aName := []string{"r12", "r10"}
	loop := func(rows int) {
		for i := 0; i < rows; i++ {
			bl(tileloadd(aTile(i), aBase[i], regBX, 0), fmt.Sprintf("TILELOADD tmm%d, [%s+rbx]", aTile(i), aName[i]))
			for j := 0; j < ct; j++ {
				if i == 0 {
					bl(tileloadd(bTile(j), regR13, regR11, 64*j), fmt.Sprintf("TILELOADD tmm%d, [r13+r11+%d]", bTile(j), 64*j))
				}
				bl(tdpbusd(i*ct+j, aTile(i), bTile(j)), fmt.Sprintf("TDPBUSD tmm%d, tmm%d, tmm%d", i*ct+j, aTile(i), bTile(j)))
			}
		}
		p("ADDQ $64, R12")
		if rows > 1 {
			p("ADDQ $64, R10")
		}
		p("ADDQ $%d, R13 // 16 k steps of B", 16*bStep)
		p("DECQ CX")
	}
	if rt > 1 {
		p("CMPQ AX, $16")
		p("JLE %s_block1", name)
		label("block")
		loop(rt)
		p("JNZ %s_block", name)
		p("JMP %s_stored", name)
		label("block1")
		loop(1)
		p("JNZ %s_block1", name)
	} else {
		label("block")
		loop(1)
		p("JNZ %s_block", name)
	}
	label("stored")
	p("LEAQ 64(R9), R12")
	for i := 0; i < rt; i++ {
		if i > 0 {
			p("CMPQ AX, $16")
			p("JLE %s_rows", name)
		}
		for j := 0; j < ct; j++ {
			bl(tilestored(i*ct+j, regR12, regR11, 16*bStep*i+64*j), fmt.Sprintf("TILESTORED [r12+r11+%d], tmm%d", 16*bStep*i+64*j, i*ct+j))
		}
	}

	// Row by row: the sums (or zeros, without a whole block), the tail's k steps, the store.
	// SI walks A's rows at the tail, R9 the sums' rows, DX C's rows, R11 the row's offset in
	// rs and rz; AX counts the rows left.
	label("rows")
	p("MOVQ kg+8(FP), CX")
	p("SHRQ $4, CX")
	p("MOVQ CX, R10")
	p("SHLQ $6, CX")
	p("ADDQ CX, SI // A at the tail")
	p("MOVQ %s, DX", locC)
	p("MOVQ ldc+40(FP), R8")
	p("SHLQ $2, R8 // C's row stride in bytes")
	p("ADDQ $64, R9")
	p("MOVQ %s, R11", locRow)
	label("row")
	p("TESTQ R10, R10")
	p("JZ %s_zero", name)
	for v := 0; v < ct; v++ {
		p("VMOVDQU32 %d(R9), Z%d", 64*v, v)
	}
	p("JMP %s_tail", name)
	label("zero")
	for v := 0; v < ct; v++ {
		p("VPXORD Z%d, Z%d, Z%d", v, v, v)
	}
	label("tail")
	p("MOVQ kg+8(FP), CX")
	p("ANDQ $15, CX")
	p("JZ %s_store", name)
	p("MOVQ SI, R12")
	p("MOVQ R10, R13")
	p("IMULQ $%d, R13", 16*bStep)
	p("ADDQ %s, R13 // B at the tail", locB)
	label("tailstep")
	for v := 0; v < ct; v++ {
		p("VMOVDQU32 %d(R13), Z%d", 64*v, 8+v)
	}
	p("VPBROADCASTD (R12), Z12")
	for v := 0; v < ct; v++ {
		bl(evex(1, 0x50, v, 12, 8+v), fmt.Sprintf("VPDPBUSD zmm%d, zmm12, zmm%d", v, 8+v))
	}
	p("ADDQ $4, R12")
	p("ADDQ $%d, R13", bStep)
	p("DECQ CX")
	p("JNZ %s_tailstep", name)
	label("store")
	p("MOVQ flags+48(FP), CX")
	p("CMPQ CX, $2")
	p("JNE %s_dequant", name)
	for v := 0; v < ct; v++ {
		p("VMOVDQU32 Z%d, %d(DX)", v, 64*v)
	}
	p("JMP %s_next", name)
	label("dequant")
	p("MOVQ rz+80(FP), R12")
	p("ADDQ R11, R12")
	p("MOVQ rs+72(FP), R13")
	p("ADDQ R11, R13")
	p("MOVQ %s, R10", locCol)
	p("MOVQ cs+88(FP), BX")
	p("ADDQ R10, BX")
	p("MOVQ csum+96(FP), DI")
	p("ADDQ R10, DI")
	p("ADDQ bias+104(FP), R10")
	var accs []string
	for v := 0; v < ct; v++ {
		accs = append(accs, fmt.Sprintf("Z%d", v))
	}
	rowStore{name: name, avx512: true, lanes: 16, accs: accs, rz: "(R12)", rs: "(R13)",
		flags: "CX", beta: "beta+56(FP)", cs: "BX", csum: "DI", bias: "R10", c: "DX", s: "Z4", z: "Z5", tmp: "Z6", tmp2: "Z7"}.emit(w)
	p("MOVQ kg+8(FP), R10")
	p("SHRQ $4, R10")
	label("next")
	p("ADDQ lda+64(FP), SI")
	p("ADDQ $%d, R9", bStep)
	p("ADDQ R8, DX")
	p("ADDQ $4, R11")
	p("DECQ AX")
	p("JNZ %s_row", name)

	// The next tile down, else the next panel's first.
	p("MOVQ h+0(FP), AX")
	p("MOVQ AX, CX")
	p("IMULQ lda+64(FP), CX")
	p("ADDQ CX, %s", locA)
	p("MOVQ %s, DX", locC)
	p("MOVQ AX, CX")
	p("IMULQ R8, CX")
	p("ADDQ CX, DX")
	p("MOVQ DX, %s", locC)
	p("MOVQ R11, %s", locRow)
	p("DECQ %s", locTiles)
	p("JNZ %s_tile", name)
	p("MOVQ mt+112(FP), CX")
	p("MOVQ CX, %s", locTiles)
	p("MOVQ a+16(FP), CX")
	p("MOVQ CX, %s", locA)
	p("MOVQ $0, %s", locRow)
	p("MOVQ %s, DX", locCP)
	p("ADDQ $%d, DX", 4*nr)
	p("MOVQ DX, %s", locCP)
	p("MOVQ DX, %s", locC)
	p("MOVQ panel+128(FP), CX")
	p("ADDQ CX, %s", locB)
	p("ADDQ $%d, %s", 4*nr, locCol)
	p("DECQ %s", locPanel)
	p("JNZ %s_tile", name)
	p("MOVQ kg+8(FP), CX")
	p("SHRQ $4, CX")
	p("JZ %s_done", name)
	bl(tilerelease(), "TILERELEASE")
	label("done")
	p("VZEROUPPER")
	p("RET")
}
