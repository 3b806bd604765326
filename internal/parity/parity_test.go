package parity

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

func f32(shape []int, v ...float32) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Float32, Shape: shape, F32: v}
}

func TestCompare(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name       string
		got, want  *tensor.Tensor
		valid      []bool
		atol, rtol float64
		pass       bool
		failed     int
		maxAbs     float64
		maxAbsAt   []int
		minAtol    float64
		nanMis     int
		err        string
	}{
		{name: "equal", got: f32([]int{2}, 1, 2), want: f32([]int{2}, 1, 2), atol: 0, rtol: 0, pass: true, maxAbsAt: []int{0}},
		{name: "within atol", got: f32([]int{2}, 1, 2.5), want: f32([]int{2}, 1, 2), atol: 0.5, rtol: 0, pass: true, maxAbs: 0.5, maxAbsAt: []int{1}, minAtol: 0.5},
		// abs 0.5 > atol 0.1, but rel 0.5/100 = 0.005 <= rtol 0.01: passes (AND rule).
		{name: "within rtol only", got: f32([]int{1}, 100.5), want: f32([]int{1}, 100), atol: 0.1, rtol: 0.01, pass: true, maxAbs: 0.5, maxAbsAt: []int{0}},
		{name: "both exceeded", got: f32([]int{2, 2}, 0, 0, 0, 1), want: f32([]int{2, 2}, 0, 0, 0, 0), atol: 0.5, rtol: 0.5, pass: false, failed: 1, maxAbs: 1, maxAbsAt: []int{1, 1}, minAtol: 1},
		{name: "masked position ignored", got: f32([]int{1, 2, 1}, 1, 9), want: f32([]int{1, 2, 1}, 1, 0), valid: []bool{true, false}, pass: true, maxAbsAt: []int{0, 0, 0}},
		{name: "mask wrong length", got: f32([]int{1, 2}, 1, 9), want: f32([]int{1, 2}, 1, 0), valid: []bool{true}, err: "mask has 1 entries"},
		{name: "nan both", got: f32([]int{2}, nan, 1), want: f32([]int{2}, nan, 1), pass: true, maxAbsAt: []int{0}},
		{name: "nan one side", got: f32([]int{2}, nan, 1), want: f32([]int{2}, 0, 1), atol: 1e9, rtol: 1e9, failed: 1, nanMis: 1, maxAbsAt: []int{1}},
		{name: "inf same", got: f32([]int{1}, inf), want: f32([]int{1}, inf), pass: true, maxAbsAt: []int{0}},
		{name: "inf vs finite", got: f32([]int{1}, inf), want: f32([]int{1}, 3), failed: 1, nanMis: 1},
		{name: "shape mismatch", got: f32([]int{2}, 1, 2), want: f32([]int{1, 2}, 1, 2), err: "shape mismatch: got (2), want (1, 2)"},
		{name: "dtype mismatch", got: f32([]int{}, 1), want: tensor.Scalar64(1), err: "dtype mismatch"},
		{name: "nil", got: nil, want: f32([]int{1}, 1), err: "missing output"},
		{name: "negative tol", got: f32([]int{1}, 1), want: f32([]int{1}, 1), atol: -1, err: "tolerances"},
		{name: "int exact", got: &tensor.Tensor{DType: tensor.Int64, Shape: []int{2}, I64: []int64{1, 2}}, want: &tensor.Tensor{DType: tensor.Int64, Shape: []int{2}, I64: []int64{1, 3}}, atol: 0.5, rtol: 0.1, failed: 1, maxAbs: 1, maxAbsAt: []int{1}, minAtol: 1},
		// zero reference: rel uses 2.22e-16, so only atol can pass it.
		{name: "zero reference", got: f32([]int{1}, 1e-7), want: f32([]int{1}, 0), atol: 1e-6, rtol: 1e-3, pass: true, maxAbs: 1e-7, maxAbsAt: []int{0}, minAtol: 1e-7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Compare("y", tc.got, tc.want, tc.valid, tc.atol, tc.rtol)
			if tc.err != "" {
				if r.Pass || !strings.Contains(r.Err, tc.err) {
					t.Fatalf("pass=%v err %q, want %q", r.Pass, r.Err, tc.err)
				}
				return
			}
			if r.Err != "" || r.Pass != tc.pass || r.Failed != tc.failed || r.NaNMismatches != tc.nanMis {
				t.Fatalf("pass=%v failed=%d nan=%d err=%q; want pass=%v failed=%d nan=%d", r.Pass, r.Failed, r.NaNMismatches, r.Err, tc.pass, tc.failed, tc.nanMis)
			}
			if math.Abs(r.MaxAbs-tc.maxAbs) > 1e-6*math.Max(1, tc.maxAbs) || !reflect.DeepEqual(r.MaxAbsAt, tc.maxAbsAt) {
				t.Errorf("max abs %g at %v, want %g at %v", r.MaxAbs, r.MaxAbsAt, tc.maxAbs, tc.maxAbsAt)
			}
			if math.Abs(r.MinAtol-tc.minAtol) > 1e-9 {
				t.Errorf("min atol %g, want %g", r.MinAtol, tc.minAtol)
			}
			// The minimum tolerances really are sufficient.
			if r.NaNMismatches == 0 {
				if again := Compare("y", tc.got, tc.want, tc.valid, r.MinAtol, tc.rtol); !again.Pass {
					t.Errorf("min atol %g does not pass", r.MinAtol)
				}
				if again := Compare("y", tc.got, tc.want, tc.valid, tc.atol, r.MinRtol); !again.Pass {
					t.Errorf("min rtol %g does not pass", r.MinRtol)
				}
			}
		})
	}
}

func TestRender(t *testing.T) {
	ok := Compare("hidden", f32([]int{1, 2, 2}, 1, 2, 3, 4), f32([]int{1, 2, 2}, 1, 2, 3, 4.00001), []bool{true, true}, 1e-4, 1e-5)
	bad := Compare("logits", f32([]int{1, 2}, 1, 5), f32([]int{1, 2}, 1, 2), nil, 1e-5, 1e-5)
	var buf bytes.Buffer
	if err := Render(&buf, []Result{ok, bad}, RenderOptions{Got: "zoo cpu", Want: "onnxruntime"}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"Comparing zoo cpu against onnxruntime",
		"Comparing Output: 'hidden' (dtype=float32, shape=(1, 2, 2))",
		"PASSED | Output: 'hidden'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"Minimum Required Tolerance: elemwise error | [abs=3] OR [rel=1.5]", "FAILED | Output: 'logits'", "at (0, 1)", "FAILED | Mismatched outputs: ['logits']"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	if err := Render(&buf, []Result{ok, bad}, RenderOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Pass || len(rep.Failed) != 1 || rep.Failed[0] != "logits" || len(rep.Outputs) != 2 || rep.Outputs[1].MaxAbs != 3 {
		t.Errorf("json report %+v", rep)
	}
	// NaN mismatches keep the JSON encodable.
	buf.Reset()
	nan := Compare("x", f32([]int{1}, float32(math.NaN())), f32([]int{1}, 1), nil, 0, 0)
	if err := Render(&buf, []Result{nan}, RenderOptions{JSON: true}); err != nil {
		t.Fatalf("json with NaN mismatch: %v", err)
	}
}
