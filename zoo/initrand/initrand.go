// Package initrand draws deterministic initial weights. Every parameter gets its own stream,
// seeded from the model seed and the parameter's name, so a weight does not depend on the
// order in which parameters are built, on threads, or on the machine: the same seed gives
// bitwise-identical weights everywhere. The generator is defined here (SplitMix64 seeding a
// xoshiro256** state) rather than taken from math/rand, whose streams are not a contract.
package initrand

import (
	"hash/fnv"
	"math"
	"math/bits"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Source is a xoshiro256** generator.
type Source struct{ s [4]uint64 }

// splitmix64 advances x and returns the next SplitMix64 output; it spreads a seed over the
// xoshiro state as its authors recommend.
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// New returns the stream for one named parameter of a model seeded with seed.
func New(seed uint64, name string) *Source {
	h := fnv.New64a()
	h.Write([]byte(name))
	x := seed ^ bits.RotateLeft64(h.Sum64(), 17)
	var s Source
	for i := range s.s {
		s.s[i] = splitmix64(&x)
	}
	return &s
}

// Uint64 returns the next 64 random bits.
func (r *Source) Uint64() uint64 {
	s := &r.s
	result := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return result
}

// Float64 returns a uniform value in [0, 1) with 53 random bits.
func (r *Source) Float64() float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// Normal returns a standard normal value (Box–Muller in float64; only the cosine branch is
// used so that each value consumes exactly two draws).
func (r *Source) Normal() float64 {
	u1 := 1 - r.Float64() // (0, 1], keeps the log finite
	u2 := r.Float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// Uniform returns a float32 tensor of the given shape drawn from U(-bound, bound), the
// distribution PyTorch's nn.Linear uses for weight and bias with bound = 1/√fan_in.
func Uniform(seed uint64, name string, bound float64, shape ...int) *tensor.Tensor {
	r := New(seed, name)
	data := make([]float32, tensor.NumElements(shape))
	for i := range data {
		data[i] = float32((2*r.Float64() - 1) * bound)
	}
	t, _ := tensor.FromFloat32(data, shape...)
	return t
}

// Normal returns a float32 tensor drawn from N(mean, std²), as nn.Embedding's N(0, 1).
func Normal(seed uint64, name string, mean, std float64, shape ...int) *tensor.Tensor {
	r := New(seed, name)
	data := make([]float32, tensor.NumElements(shape))
	for i := range data {
		data[i] = float32(mean + std*r.Normal())
	}
	t, _ := tensor.FromFloat32(data, shape...)
	return t
}

// Fill returns a float32 tensor with every element set to v (LayerNorm's 1 and 0).
func Fill(v float32, shape ...int) *tensor.Tensor {
	data := make([]float32, tensor.NumElements(shape))
	for i := range data {
		data[i] = v
	}
	t, _ := tensor.FromFloat32(data, shape...)
	return t
}
