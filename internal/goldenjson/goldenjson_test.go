package goldenjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name, in string
		want     *tensor.Tensor
		err      string
	}{
		{"float32", `{"dtype":"float32","shape":[2],"data":[0.5,-0.125]}`, &tensor.Tensor{DType: tensor.Float32, Shape: []int{2}, F32: []float32{0.5, -0.125}}, ""},
		{"int64 scalar", `{"dtype":"int64","shape":[],"data":[7]}`, &tensor.Tensor{DType: tensor.Int64, Shape: []int{}, I64: []int64{7}}, ""},
		{"bool", `{"dtype":"bool","shape":[1,2],"data":[0,1]}`, &tensor.Tensor{DType: tensor.Bool, Shape: []int{1, 2}, Bool: []bool{false, true}}, ""},
		{"int32", `{"dtype":"int32","shape":[1],"data":[-3]}`, &tensor.Tensor{DType: tensor.Int32, Shape: []int{1}, I64: []int64{-3}}, ""},
		{"short data", `{"dtype":"float32","shape":[3],"data":[1]}`, nil, "golden tensor"},
		{"dtype", `{"dtype":"float16","shape":[1],"data":[1]}`, nil, `dtype "float16"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var j Tensor
			if err := json.Unmarshal([]byte(c.in), &j); err != nil {
				t.Fatal(err)
			}
			got, err := j.Decode()
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
			if back := Encode(got); !reflect.DeepEqual(back, j) {
				t.Fatalf("Encode(Decode(x)) = %+v, want %+v", back, j)
			}
		})
	}
}
