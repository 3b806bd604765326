package zoo

import (
	"math"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestConvertTo(t *testing.T) {
	ints, _ := tensor.FromInt64([]int64{0, 1, 300}, 3)
	for _, c := range []struct {
		dt   tensor.DType
		in   *tensor.Tensor
		want string
	}{
		{tensor.Uint8, ints, "element 2 is 300, outside uint8's range"},
		{tensor.Bool, ints, "element 2 is 300; a bool input takes 0 or 1"},
		{tensor.Int64, tensor.ScalarF(1.5), "zoo does not convert float32 to int64; save the array as int64"},
	} {
		if _, err := convertTo(c.in, c.dt); err == nil || err.Error() != c.want {
			t.Errorf("convertTo(%v, %v) = %v, want %q", c.in.DType, c.dt, err, c.want)
		}
	}
	h, err := convertTo(tensor.ScalarF(1.0001), tensor.Float16)
	if err != nil || h.DType != tensor.Float16 || h.F32[0] != 1 {
		t.Errorf("float16: %v %v", h, err)
	}
	f, err := convertTo(ints, tensor.Float32)
	if err != nil || f.F32[2] != 300 || math.IsNaN(float64(f.F32[0])) {
		t.Errorf("int64 to float32: %v %v", f, err)
	}
}
