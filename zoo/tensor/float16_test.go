package tensor

import (
	"math"
	"testing"
)

// TestFloat16AndBFloat16Bits checks the conversions against numpy's astype(float16) and
// torch's .to(torch.bfloat16) (values printed by numpy 1.24 and torch 1.13 for these float32
// inputs: ties, overflow thresholds, subnormals and their rounding to zero).
func TestFloat16AndBFloat16Bits(t *testing.T) {
	cases := []struct {
		f        float64
		half, bf uint16
	}{
		{0.0, 0x0000, 0x0000},
		{math.Copysign(0, -1), 0x8000, 0x8000},
		{1.0, 0x3c00, 0x3f80},
		{-2.5, 0xc100, 0xc020},
		{65504.0, 0x7bff, 0x4780},
		{65519.98828125, 0x7bff, 0x4780},
		{65520.0, 0x7c00, 0x4780},
		{100000.0, 0x7c00, 0x47c3},
		{5.960464477539063e-08, 0x0001, 0x3380},
		{2.9802322387695312e-08, 0x0000, 0x3300},
		{2.980232949312267e-08, 0x0001, 0x3300},
		{8.940696716308594e-08, 0x0002, 0x33c0},
		{6.097555160522461e-05, 0x03ff, 0x3880},
		{6.103515625e-05, 0x0400, 0x3880},
		{1.0009765625, 0x3c01, 0x3f80},
		{1.00048828125, 0x3c00, 0x3f80},
		{1.00146484375, 0x3c02, 0x3f80},
		{0.10000000149011612, 0x2e66, 0x3dcd},
		{3.1415927410125732, 0x4248, 0x4049},
		{-9.99999993922529e-09, 0x8000, 0xb22c},
		{math.Inf(1), 0x7c00, 0x7f80},
		{math.Inf(-1), 0xfc00, 0xff80},
		{3.3895313892515355e+38, 0x7c00, 0x7f7f},
		{1.00390625, 0x3c04, 0x3f80},
		{1.01171875, 0x3c0c, 0x3f82},
		{1.0078125, 0x3c08, 0x3f81},
		{-0.3333333432674408, 0xb555, 0xbeab},
	}
	for _, c := range cases {
		f := float32(c.f)
		if got := Float16Bits(f); got != c.half {
			t.Errorf("Float16Bits(%g) = %#04x, want %#04x", f, got, c.half)
		}
		if got := BFloat16Bits(f); got != c.bf {
			t.Errorf("BFloat16Bits(%g) = %#04x, want %#04x", f, got, c.bf)
		}
	}
	nan := float32(math.NaN())
	if h := Float16Bits(nan); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("Float16Bits(NaN) = %#04x, not a NaN", h)
	}
	if b := BFloat16Bits(nan); b&0x7f80 != 0x7f80 || b&0x7f == 0 {
		t.Errorf("BFloat16Bits(NaN) = %#04x, not a NaN", b)
	}
}

// Every binary16 encoding decodes to a float32 that encodes back to itself (NaNs stay NaN),
// and the same for bfloat16.
func TestFloat16RoundTripAllEncodings(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float16FromBits(uint16(h))
		if math.IsNaN(float64(f)) {
			if !math.IsNaN(float64(Float16FromBits(Float16Bits(f)))) {
				t.Fatalf("half NaN %#04x does not stay NaN", h)
			}
		} else if got := Float16Bits(f); got != uint16(h) {
			t.Fatalf("half %#04x -> %g -> %#04x", h, f, got)
		}
		b := BFloat16FromBits(uint16(h))
		if !math.IsNaN(float64(b)) && BFloat16Bits(b) != uint16(h) {
			t.Fatalf("bfloat16 %#04x -> %g -> %#04x", h, b, BFloat16Bits(b))
		}
	}
	if v := Float16FromBits(0x0001); v != float32(math.Ldexp(1, -24)) {
		t.Errorf("smallest subnormal half = %g", v)
	}
}

func TestNewSmallDTypes(t *testing.T) {
	for _, dt := range []DType{Float16, BFloat16, Int8, Uint8} {
		x, err := New(dt, 2, 3)
		if err != nil {
			t.Fatalf("New(%v): %v", dt, err)
		}
		if err := x.Check(); err != nil || x.Len() != 6 {
			t.Errorf("New(%v): Len %d, Check %v", dt, x.Len(), err)
		}
	}
	if Float16.Size() != 2 || Int8.Size() != 1 || Uint8.String() != "uint8" || BFloat16.String() != "bfloat16" {
		t.Error("wrong size or name for a small dtype")
	}
}
