package main

import (
	"strconv"
)

// appendFloat32 formats x as JSON: the shortest decimal that parses back to the same float32;
// NaN and infinities (not JSON) become null.
func appendFloat32(buf []byte, x float32) []byte {
	f := float64(x)
	if f != f || f > 3.4e38 || f < -3.4e38 {
		return append(buf, "null"...)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 32)
}
