package tensorio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

func mustF32(t testing.TB, data []float32, shape ...int) *tensor.Tensor {
	x, err := tensor.FromFloat32(data, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func goldens(t testing.TB) map[string]*tensor.Tensor {
	i32, _ := tensor.New(tensor.Int32, 0, 3)
	b, _ := tensor.FromBool([]bool{true, false, false, true}, 2, 2)
	i64, _ := tensor.FromInt64([]int64{0, 1, -1, 1 << 62}, 4)
	return map[string]*tensor.Tensor{
		"f32_2x3.npy":    mustF32(t, []float32{0, 1.5, -2, 3.25, float32(math.Inf(1)), float32(math.Copysign(0, -1))}, 2, 3),
		"i64_4.npy":      i64,
		"b1_2x2.npy":     b,
		"f32_scalar.npy": tensor.ScalarF(7),
		"i32_0x3.npy":    i32,
		"f16_3.npy":      {DType: tensor.Float16, Shape: []int{3}, F32: []float32{1, -2.5, 65504}},
		"i8_3.npy":       {DType: tensor.Int8, Shape: []int{3}, I64: []int64{-128, 0, 127}},
		"u8_3.npy":       {DType: tensor.Uint8, Shape: []int{3}, I64: []int64{0, 1, 255}},
	}
}

// numpy's float64 arrays read as float32, each value rounded to nearest (1e300 to +-Inf).
func TestReadNPYFloat64(t *testing.T) {
	b, err := os.ReadFile("testdata/f64_2.npy")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadNPY(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	want := mustF32(t, []float32{0.1, float32(math.Inf(-1))}, 2)
	if !tensor.Equal(got, want) {
		t.Errorf("ReadNPY(f64) = %+v, want %+v", got, want)
	}
}

// The golden files were written by numpy.save (testdata/make_golden.py).
func TestWriteNPYMatchesNumpyBytes(t *testing.T) {
	for name, x := range goldens(t) {
		want, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteNPY(&buf, x); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: WriteNPY bytes differ from numpy's:\n got %q\nwant %q", name, buf.Bytes(), want)
		}
		got, err := ReadNPY(bytes.NewReader(want))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !tensor.Equal(got, x) {
			t.Errorf("%s: ReadNPY = %+v, want %+v", name, got, x)
		}
	}
}

func TestNPYRoundTrip(t *testing.T) {
	long := make([]float32, 3*1000)
	for i := range long {
		long[i] = float32(i) * 0.25
	}
	nan := mustF32(t, []float32{float32(math.NaN()), math.Float32frombits(0x7fc00001)}, 2)
	for _, x := range []*tensor.Tensor{
		mustF32(t, long, 3, 1000),
		nan,
		tensor.Scalar64(-5),
		{DType: tensor.Int32, Shape: []int{3}, I64: []int64{math.MinInt32, 0, math.MaxInt32}},
	} {
		var buf bytes.Buffer
		if err := WriteNPY(&buf, x); err != nil {
			t.Fatal(err)
		}
		// Through a plain reader (no Seek) and one byte at a time.
		got, err := ReadNPY(iotest.OneByteReader(bytes.NewReader(buf.Bytes())))
		if err != nil {
			t.Fatal(err)
		}
		if !tensor.Equal(got, x) {
			t.Errorf("round trip of %v changed it", x.Shape)
		}
	}
}

func TestWriteNPYErrors(t *testing.T) {
	for _, tc := range []struct {
		x    *tensor.Tensor
		want string
	}{
		{nil, "npy: tensor is nil"},
		{&tensor.Tensor{DType: tensor.Float32, Shape: []int{3}, F32: []float32{1}}, "npy: tensor of shape [3] holds 1 float32 values, want 3"},
		{&tensor.Tensor{DType: tensor.Int32, Shape: []int{1}, I64: []int64{1 << 40}}, "npy: write data: int32 tensor holds 1099511627776, out of range"},
		{&tensor.Tensor{DType: tensor.Uint8, Shape: []int{1}, I64: []int64{256}}, "npy: write data: uint8 tensor holds 256, out of range"},
		{&tensor.Tensor{DType: tensor.BFloat16, Shape: []int{1}, F32: []float32{1}}, "npy: unsupported dtype bfloat16"},
	} {
		err := WriteNPY(io.Discard, tc.x)
		if err == nil || err.Error() != tc.want {
			t.Errorf("WriteNPY error = %v, want %q", err, tc.want)
		}
	}
	err := WriteNPY(failWriter{}, tensor.ScalarF(1))
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("write error = %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// npyWith builds a .npy v1.0 file with the given header dictionary and data.
func npyWith(dict string, data []byte) []byte {
	h := dict + "\n"
	b := append([]byte(npyMagic), 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h)))
	return append(append(b, h...), data...)
}

func TestReadNPYErrors(t *testing.T) {
	okDict := "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
	v2 := append([]byte(npyMagic), 2, 0)
	v2 = binary.LittleEndian.AppendUint32(v2, 1<<30)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "npy: reading magic: unexpected EOF"},
		{"bad magic", []byte("PK\x03\x04xxxxxxxxx"), `npy: not a .npy file (bad magic "PK\x03\x04xx")`},
		{"version", []byte(npyMagic + "\x04\x00\x00\x00"), "npy: unsupported format version 4.0"},
		{"huge v2 header", v2, "npy: header of 1073741824 bytes is longer than the limit of 65536"},
		{"short header", append([]byte(npyMagic+"\x01\x00"), 0xff, 0), "npy: reading 255-byte header: unexpected EOF"},
		{"no newline", append(append([]byte(npyMagic+"\x01\x00"), 3, 0), "{} "...), "npy: header does not end with a newline"},
		{"not a dict", npyWith("[1, 2]", nil), `npy: malformed header "[1, 2]": want '{' at byte 0`},
		{"missing key", npyWith("{'descr': '<f4', 'shape': (2,)}", make([]byte, 8)), `npy: header has no "fortran_order" key`},
		{"extra key", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 'y'}", make([]byte, 8)), `npy: header has unknown key "x"`},
		{"dup key", npyWith("{'descr': '<f4', 'descr': '<f4'}", nil), `npy: malformed header "{'descr': '<f4', 'descr': '<f4'}": duplicate key "descr"`},
		{"big endian", npyWith("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", make([]byte, 8)), `npy: big-endian dtype ">f4" is not supported (save with a.astype(a.dtype.newbyteorder('<')))`},
		{"object", npyWith("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", make([]byte, 16)), `npy: object arrays (dtype "|O") are not supported: save a numeric array`},
		{"complex", npyWith("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", make([]byte, 16)), `npy: unsupported dtype "<c8" (zoo reads '<f4', '<f8', '<f2', '<i8', '<i4', '|i1', '|u1', '|b1')`},
		{"short float64", npyWith("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", make([]byte, 8)), "npy: shape [2] of float64 needs 16 data bytes, file has 8"},
		{"fortran", npyWith("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", make([]byte, 8)), "npy: Fortran-order arrays are not supported (save with np.ascontiguousarray)"},
		{"shape not tuple", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': '2', }", nil), "npy: header 'shape' is not a tuple of integers"},
		{"negative dim", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", nil), `npy: malformed header "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }": want a dimension at byte 51`},
		{"too many elements", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }", nil), "npy: shape [65536 65536] has more than 2^31 elements"},
		{"huge dim", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", nil), `npy: malformed header "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }": dimension 99999999999999999999 is too large`},
		{"short data", npyWith(okDict, make([]byte, 7)), "npy: shape [2] of float32 needs 8 data bytes, file has 7"},
		{"long data", npyWith(okDict, make([]byte, 9)), "npy: shape [2] of float32 needs 8 data bytes, file has 9"},
		{"bad bool", npyWith("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", []byte{1, 2}), "npy: bool element 1 is byte 0x02, want 0 or 1"},
		{"trailing garbage", npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", nil), `npy: malformed header "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x": unexpected "x" after the dictionary`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadNPY(bytes.NewReader(tc.in))
			if err == nil || err.Error() != tc.want {
				t.Errorf("ReadNPY error =\n %v\nwant\n %s", err, tc.want)
			}
		})
	}
	// Without Seek, the short/long checks happen after reading.
	_, err := ReadNPY(iotest.OneByteReader(bytes.NewReader(npyWith(okDict, make([]byte, 9)))))
	if err == nil || err.Error() != "npy: trailing bytes after the 8 data bytes of shape [2]" {
		t.Errorf("streamed long data: %v", err)
	}
	_, err = ReadNPY(iotest.OneByteReader(bytes.NewReader(npyWith(okDict, make([]byte, 3)))))
	if err == nil || err.Error() != "npy: shape [2] of float32 needs 8 data bytes, file has 3" {
		t.Errorf("streamed short data: %v", err)
	}
}

func TestReadNPYAcceptsVariants(t *testing.T) {
	// Double quotes, no trailing comma, Python-2 long suffix, format 2.0.
	x, err := ReadNPY(bytes.NewReader(npyWith(`{"descr": "<i8", "shape": (1L, 2), "fortran_order": False}`, make([]byte, 16))))
	if err != nil || !tensor.SameShape(x.Shape, []int{1, 2}) {
		t.Fatalf("got %v, %v", x, err)
	}
	h := "{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }\n"
	b := append([]byte(npyMagic), 2, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
	b = append(append(b, h...), 1)
	x, err = ReadNPY(bytes.NewReader(b))
	if err != nil || !x.Bool[0] {
		t.Fatalf("v2: got %v, %v", x, err)
	}
}

// A declared shape of 2^31 elements with no data must fail without allocating 8 GiB.
func TestReadNPYHugeDeclaredShape(t *testing.T) {
	in := npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (32768, 65536), }", make([]byte, 100))
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := ReadNPY(bytes.NewReader(in)); err == nil {
				b.Fatal("no error")
			}
		}
	})
	if res.AllocedBytesPerOp() > 4<<20 {
		t.Fatalf("ReadNPY of a truncated huge array allocated %d bytes", res.AllocedBytesPerOp())
	}
	var ms1, ms2 = new(runtimeMem), new(runtimeMem)
	ms1.read()
	_, err := ReadNPY(iotest.OneByteReader(bytes.NewReader(in)))
	ms2.read()
	if err == nil {
		t.Fatal("no error")
	}
	if d := ms2.total - ms1.total; d > 4<<20 {
		t.Fatalf("streamed ReadNPY of a truncated huge array allocated %d bytes", d)
	}
}

func TestSafetensorsRoundTrip(t *testing.T) {
	i64, _ := tensor.FromInt64([]int64{1, 2, 3}, 3)
	b, _ := tensor.FromBool([]bool{true, false, true}, 3, 1)
	in := map[string]*tensor.Tensor{
		"layers.0.w": mustF32(t, []float32{1, 2, 3, 4, 5, 6}, 2, 3),
		"tokens":     i64,
		"mask":       b,
		"scalar":     tensor.ScalarF(-1),
		"empty":      mustF32(t, []float32{}, 0, 4),
		"i32":        {DType: tensor.Int32, Shape: []int{2}, I64: []int64{-7, 7}},
	}
	meta := map[string]string{"format": "pt", "model": "vanilla<tiny>"}
	var b1, b2 bytes.Buffer
	if err := WriteSafetensorsMap(&b1, in, meta); err != nil {
		t.Fatal(err)
	}
	// Determinism: same bytes from a list in another order.
	list := []Named{{"tokens", i64}, {"mask", b}, {"scalar", in["scalar"]}, {"layers.0.w", in["layers.0.w"]}, {"empty", in["empty"]}, {"i32", in["i32"]}}
	if err := WriteSafetensors(&b2, list, meta); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatal("output depends on input order")
	}
	hlen := binary.LittleEndian.Uint64(b1.Bytes())
	if hlen%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", hlen)
	}
	hdr := string(b1.Bytes()[8 : 8+hlen])
	wantHdr := `{"__metadata__":{"format":"pt","model":"vanilla<tiny>"},"empty":{"dtype":"F32","shape":[0,4],"data_offsets":[24,24]},"i32":{"dtype":"I32","shape":[2],"data_offsets":[24,32]},"layers.0.w":{"dtype":"F32","shape":[2,3],"data_offsets":[32,56]},"mask":{"dtype":"BOOL","shape":[3,1],"data_offsets":[60,63]},"scalar":{"dtype":"F32","shape":[],"data_offsets":[56,60]},"tokens":{"dtype":"I64","shape":[3],"data_offsets":[0,24]}}`
	if strings.TrimRight(hdr, " ") != wantHdr {
		t.Errorf("header:\n got %s\nwant %s", hdr, wantHdr)
	}
	for _, read := range []func([]byte) ([]Named, map[string]string, error){
		ReadSafetensors,
		func(b []byte) ([]Named, map[string]string, error) { return ReadSafetensorsFrom(bytes.NewReader(b)) },
		func(b []byte) ([]Named, map[string]string, error) {
			return ReadSafetensorsFrom(iotest.OneByteReader(bytes.NewReader(b)))
		},
	} {
		out, gotMeta, err := read(b1.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(in) || gotMeta["model"] != "vanilla<tiny>" || len(gotMeta) != 2 {
			t.Fatalf("got %d tensors, meta %v", len(out), gotMeta)
		}
		for i, nt := range out {
			if i > 0 && out[i-1].Name >= nt.Name {
				t.Errorf("not sorted: %q before %q", out[i-1].Name, nt.Name)
			}
			if !tensor.Equal(nt.Tensor, in[nt.Name]) {
				t.Errorf("%s changed: %+v", nt.Name, nt.Tensor)
			}
		}
		if Lookup(out, "tokens") == nil || Lookup(out, "nope") != nil {
			t.Error("Lookup")
		}
	}
	// No metadata: no __metadata__ key, nil map back.
	var b3 bytes.Buffer
	if err := WriteSafetensors(&b3, []Named{{"x", tensor.ScalarF(1)}}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b3.String(), MetadataKey) {
		t.Error("empty metadata written")
	}
	if _, m, err := ReadSafetensors(b3.Bytes()); err != nil || m != nil {
		t.Errorf("meta %v, err %v", m, err)
	}
}

func TestWriteSafetensorsErrors(t *testing.T) {
	one := tensor.ScalarF(1)
	for _, tc := range []struct {
		list []Named
		meta map[string]string
		want string
	}{
		{[]Named{{"", one}}, nil, "safetensors: tensor with an empty name"},
		{[]Named{{"a", one}, {"a", one}}, nil, `safetensors: duplicate tensor name "a"`},
		{[]Named{{"__metadata__", one}}, nil, `safetensors: "__metadata__" is reserved and cannot name a tensor`},
		{[]Named{{"a\xff", one}}, nil, `safetensors: tensor name "a\xff" is not valid UTF-8`},
		{[]Named{{"a", nil}}, nil, `safetensors: tensor "a": tensor is nil`},
		{[]Named{{"a", &tensor.Tensor{DType: tensor.Float32, Shape: []int{2}}}}, nil, `safetensors: tensor "a": tensor of shape [2] holds 0 float32 values, want 2`},
		{nil, map[string]string{"k": "\xff"}, `safetensors: metadata "k" is not valid UTF-8`},
	} {
		var buf bytes.Buffer
		err := WriteSafetensors(&buf, tc.list, tc.meta)
		if err == nil || err.Error() != tc.want {
			t.Errorf("error = %v, want %q", err, tc.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%q: wrote %d bytes before failing", tc.want, buf.Len())
		}
	}
}

// stFile builds a safetensors file from a raw header and data.
func stFile(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

func TestReadSafetensorsErrors(t *testing.T) {
	huge := binary.LittleEndian.AppendUint64(nil, 1<<40)
	big := binary.LittleEndian.AppendUint64(nil, 1000)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"short", []byte{1, 2}, "safetensors: file of 2 bytes is too short for the 8-byte header length"},
		{"huge header", huge, "safetensors: header length 1099511627776 is beyond the limit of 100000000"},
		{"header past end", append(big, "{}"...), "safetensors: header length 1000 is beyond the end of the 10-byte file"},
		{"not object", stFile("[]", nil), "safetensors: header is not a JSON object"},
		{"bad json", stFile(`{"a":`, nil), "safetensors: header JSON at \"a\": unexpected EOF"},
		{"trailing json", stFile(`{}{}`, nil), "safetensors: header has data after its JSON object"},
		{"dup name", stFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, make([]byte, 4)), `safetensors: header names "a" twice`},
		{"unknown key", stFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4],"x":1}}`, make([]byte, 4)), `safetensors: tensor "a": unknown key "x"`},
		{"missing key", stFile(`{"a":{"dtype":"F32","shape":[]}}`, make([]byte, 4)), `safetensors: tensor "a": missing "data_offsets"`},
		{"three offsets", stFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4,8]}}`, make([]byte, 4)), `safetensors: tensor "a": bad data_offsets [0,4,8]`},
		{"float dim", stFile(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, make([]byte, 4)), `safetensors: tensor "a": bad shape [1.5]`},
		{"null shape", stFile(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, make([]byte, 4)), `safetensors: tensor "a": bad shape null`},
		{"f16", stFile(`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), `safetensors: tensor "a": unsupported dtype "F16" (zoo reads F32, I32, I64, BOOL)`},
		{"negative dim", stFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, nil), `safetensors: tensor "a": negative dimension in shape [-1]`},
		{"out of range", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 4)), `safetensors: tensor "a": data_offsets [0, 8] outside the 4 data bytes`},
		{"reversed", stFile(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, make([]byte, 4)), `safetensors: tensor "a": data_offsets [4, 0] outside the 4 data bytes`},
		{"size mismatch", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), `safetensors: tensor "a": shape [2] of F32 needs 8 bytes, data_offsets [0, 4] hold 4`},
		{"overflow", stFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, make([]byte, 4)), `safetensors: tensor "a": shape [4294967296 4294967296] has more than 2^31 elements`},
		{"overlap", stFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, make([]byte, 4)), `safetensors: tensor "b": data_offsets [0, 4] overlap another tensor`},
		{"hole", stFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[4,8]}}`, make([]byte, 8)), `safetensors: tensor "a": data_offsets [4, 8] leave a hole after byte 0`},
		{"trailing data", stFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, make([]byte, 6)), "safetensors: 2 bytes after the last tensor (data is 6 bytes, tensors cover 4)"},
		{"bad bool", stFile(`{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}`, []byte{7}), `safetensors: tensor "a": bool element 0 is byte 0x07, want 0 or 1`},
		{"meta not strings", stFile(`{"__metadata__":{"a":1}}`, nil), "safetensors: __metadata__ must map strings to strings: json: cannot unmarshal number into Go value of type string"},
		{"invalid utf8", stFile("{\"\xff\":{}}", nil), "safetensors: header is not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadSafetensors(tc.in)
			if err == nil || err.Error() != tc.want {
				t.Errorf("ReadSafetensors error =\n %v\nwant\n %s", err, tc.want)
			}
			_, _, err2 := ReadSafetensorsFrom(bytes.NewReader(tc.in))
			if err2 == nil {
				t.Errorf("ReadSafetensorsFrom accepted it")
			}
		})
	}
	// Spaces after the JSON object (the reference writer's padding) are fine.
	if _, _, err := ReadSafetensors(stFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}   `, make([]byte, 4))); err != nil {
		t.Errorf("padded header: %v", err)
	}
}

func TestNumpyReadsOurFiles(t *testing.T) {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		t.Skipf("%s with numpy is not available: %v", py, err)
	}
	dir := t.TempDir()
	type want struct {
		DType string `json:"dtype"`
		Shape []int  `json:"shape"`
		Data  any    `json:"data"`
	}
	wantOf := func(x *tensor.Tensor) want {
		w := want{DType: x.DType.String(), Shape: x.Shape}
		switch x.DType {
		case tensor.Float32:
			f := make([]float64, len(x.F32))
			for i, v := range x.F32 {
				f[i] = float64(v)
			}
			w.Data = f
		case tensor.Bool:
			w.Data = x.Bool
		default:
			w.Data = x.I64
		}
		return w
	}
	writeJSON := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	i64, _ := tensor.FromInt64([]int64{-3, 4, 1 << 40}, 3, 1)
	mask, _ := tensor.FromBool([]bool{false, true}, 1, 2)
	cases := map[string]*tensor.Tensor{
		"f32": mustF32(t, []float32{0.1, -2, 3e-8, 1e30, 5, 6}, 3, 2),
		"i64": i64, "mask": mask, "scalar": tensor.ScalarF(2.5),
		"i32": {DType: tensor.Int32, Shape: []int{2}, I64: []int64{-1, 1 << 30}},
	}
	st := map[string]any{"__metadata__": map[string]string{"zoo": "test"}}
	for name, x := range cases {
		err := AtomicWriteFile(filepath.Join(dir, name+".npy"), func(w io.Writer) error { return WriteNPY(w, x) })
		if err != nil {
			t.Fatal(err)
		}
		writeJSON(name+".json", wantOf(x))
		st[name] = wantOf(x)
	}
	err := AtomicWriteFile(filepath.Join(dir, "all.safetensors"), func(w io.Writer) error {
		return WriteSafetensorsMap(w, cases, map[string]string{"zoo": "test"})
	})
	if err != nil {
		t.Fatal(err)
	}
	writeJSON("all.json", st)
	out, err := exec.Command(py, "testdata/check_numpy.py", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy check failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
