//go:build !amd64 || purego

package vec

func expSum(dst, src []float32, shift float32) float32 { return expSumGeneric(dst, src, shift) }
func expSumFlush(dst, src []float32, shift float32) float32 {
	return expSumFlushGeneric(dst, src, shift)
}
func max32(x []float32) float32                   { return maxGeneric(x) }
func scale(x []float32, c float32)                { scaleGeneric(x, c) }
func div(x []float32, c float32)                  { divGeneric(x, c) }
func add(dst, a, b []float32)                     { addGeneric(dst, a, b) }
func sub(dst, a, b []float32)                     { subGeneric(dst, a, b) }
func accF64(acc []float64, x []float32)           { accF64Generic(acc, x) }
func biasAct(x, bias []float32, act Act)          { biasActGeneric(x, bias, act) }
func relu(dst, src []float32)                     { reluGeneric(dst, src) }
func gelu(dst, src []float32)                     { geluGeneric(dst, src) }
func erfv(dst, src []float32)                     { erfGeneric(dst, src) }
func eluAdd(dst, src []float32, alpha, c float32) { eluAddGeneric(dst, src, alpha, c) }
func rotateHalf(y, x, c, s []float32)             { rotateHalfGeneric(y, x, c, s, 0) }
func sum(x []float32) float32                     { return sumGeneric(x) }
func dot(a, b []float32) float32                  { return dotGeneric(a, b) }
func shift(x []float32, c float32)                { shiftGeneric(x, c) }
func sqDev(x []float32, mu float32) float32       { return sqDevGeneric(x, mu) }
func normAffine(dst, x, g, b []float32, mu, is float32) {
	normAffineGeneric(dst, x, g, b, mu, is)
}
func expSumU8(dst []uint8, src []float32, shift float32) float32 {
	return expSumU8Generic(dst, src, shift)
}
