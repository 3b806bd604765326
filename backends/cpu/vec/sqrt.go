package vec

import "math"

// sqrt32 is a correctly rounded float32 square root (the float64 root of a float32 rounds
// to the correctly rounded float32 one).
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
