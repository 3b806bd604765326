package tensorio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// rawSafetensors hand-writes a one-tensor safetensors file of dtype with data.
func rawSafetensors(t *testing.T, dtype string, shape []int, data []byte) []byte {
	t.Helper()
	hdr, err := json.Marshal(map[string]any{"w": map[string]any{"dtype": dtype, "shape": shape, "data_offsets": []int{0, len(data)}}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_ = binary.Write(&buf, binary.LittleEndian, uint64(len(hdr)))
	buf.Write(hdr)
	buf.Write(data)
	return buf.Bytes()
}

func TestReadWeightsWidens(t *testing.T) {
	le16 := func(v ...uint16) []byte {
		b := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
		return b
	}
	f64 := make([]byte, 16)
	binary.LittleEndian.PutUint64(f64, math.Float64bits(0.1))
	binary.LittleEndian.PutUint64(f64[8:], math.Float64bits(-3e40)) // beyond float32: rounds to -Inf
	for _, tc := range []struct {
		dtype string
		data  []byte
		want  []float32
	}{
		// half: 1, -2, 65504 (largest), 2^-24 (smallest subnormal), 2^-14 (smallest normal), +Inf, -0
		{"F16", le16(0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x7c00, 0x8000),
			[]float32{1, -2, 65504, 1.0 / (1 << 24), 1.0 / (1 << 14), float32(math.Inf(1)), float32(math.Copysign(0, -1))}},
		// bfloat16: the top half of a float32: 1, -2, 3.140625 (0x4049), 1e38-ish
		{"BF16", le16(0x3f80, 0xc000, 0x4049, 0x7f7f), []float32{1, -2, 3.140625, math.Float32frombits(0x7f7f0000)}},
		{"F64", f64, []float32{0.1, float32(math.Inf(-1))}},
	} {
		file := rawSafetensors(t, tc.dtype, []int{len(tc.want)}, tc.data)
		if _, _, err := ReadSafetensors(file); err == nil || !strings.Contains(err.Error(), "unsupported dtype") {
			t.Errorf("%s: ReadSafetensors accepted it (err %v); only ReadWeightsFrom converts", tc.dtype, err)
		}
		list, _, err := ReadWeightsFrom(bytes.NewReader(file))
		if err != nil {
			t.Fatalf("%s: %v", tc.dtype, err)
		}
		got := list[0].Tensor.F32
		for i, w := range tc.want {
			if math.Float32bits(got[i]) != math.Float32bits(w) {
				t.Errorf("%s[%d] = %v, want %v", tc.dtype, i, got[i], w)
			}
		}
	}
	// Sizes are checked in the file's element size.
	if _, _, err := ReadWeightsFrom(bytes.NewReader(rawSafetensors(t, "F16", []int{3}, make([]byte, 4)))); err == nil || !strings.Contains(err.Error(), "needs 6 bytes") {
		t.Errorf("short F16 data: err %v", err)
	}
	if _, _, err := ReadWeightsFrom(bytes.NewReader(rawSafetensors(t, "F8_E4M3", []int{1}, make([]byte, 1)))); err == nil || !strings.Contains(err.Error(), "F16, BF16, F64") {
		t.Errorf("F8: err %v", err)
	}
}

func TestFloat16EveryValue(t *testing.T) {
	// Every finite half is exactly representable: converting back by rounding float32 to the
	// nearest half (through float64 arithmetic on the exact value) must give the same bits.
	for h := 0; h < 1<<16; h++ {
		f := tensor.Float16FromBits(uint16(h))
		exp := (h >> 10) & 0x1f
		if exp == 0x1f {
			if (h&0x3ff == 0) != !math.IsNaN(float64(f)) {
				t.Fatalf("%#04x: %v, want %s", h, f, map[bool]string{true: "infinity", false: "NaN"}[h&0x3ff == 0])
			}
			continue
		}
		frac := float64(h & 0x3ff)
		var want float64
		if exp == 0 {
			want = frac * math.Pow(2, -24)
		} else {
			want = (1 + frac/1024) * math.Pow(2, float64(exp-15))
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("%#04x: %v, want %v", h, f, want)
		}
	}
}
