package gemm

// Transpose writes the transpose of the rows × cols matrix src (row stride lds) into dst
// (cols × rows, row stride ldd): dst[j·ldd+i] = src[i·lds+j], the rest of dst untouched.
// Where the CPU has AVX-512 (at that kernel level) the strips of 16 rows go through 16×16
// transposes in registers, the edges through transposeGo, its Go statement; both move the
// values unchanged. It panics when src or dst is too short for the shape and strides.
func Transpose(dst, src []float32, rows, cols, lds, ldd int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	_ = src[(rows-1)*lds+cols-1]
	_ = dst[(cols-1)*ldd+rows-1]
	fr, fc := transposeFast(dst, src, rows, cols, lds, ldd)
	if fr == 0 || fc == 0 {
		transposeGo(dst, src, rows, cols, lds, ldd)
		return
	}
	if fc < cols { // the columns right of the blocks, for their rows
		transposeGo(dst[fc*ldd:], src[fc:], fr, cols-fc, lds, ldd)
	}
	if fr < rows { // the rows below them, every column
		transposeGo(dst[fr:], src[fr*lds:], rows-fr, cols, lds, ldd)
	}
}

// transposeGo is Transpose in Go, in 8×8 blocks held in arrays (array pointers, so each
// row of a block costs one bounds check), so both sides move 32-byte pieces of rows; the
// edges go element by element.
func transposeGo(dst, src []float32, rows, cols, lds, ldd int) {
	const bs = 8
	fr, fc := rows/bs*bs, cols/bs*bs
	for i0 := 0; i0 < fr; i0 += bs {
		for j0 := 0; j0 < fc; j0 += bs {
			var b [bs][bs]float32
			for i := range b {
				b[i] = *(*[bs]float32)(src[(i0+i)*lds+j0:])
			}
			for j := 0; j < bs; j++ {
				d := (*[bs]float32)(dst[(j0+j)*ldd+i0:])
				d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = b[0][j], b[1][j], b[2][j], b[3][j], b[4][j], b[5][j], b[6][j], b[7][j]
			}
		}
	}
	for i := 0; i < rows; i++ {
		j0 := fc
		if i >= fr {
			j0 = 0
		}
		for j := j0; j < cols; j++ {
			dst[j*ldd+i] = src[i*lds+j]
		}
	}
}
