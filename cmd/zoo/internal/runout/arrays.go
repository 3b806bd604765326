package runout

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// WriteArrays writes outputs atomically to path: .npy (the one array), .safetensors (every
// array, float16 and bfloat16 as float32, int8 and uint8 as int32, with meta) or .json
// ({"model", "backend", "input", "outputs": {NAME: {"shape", "data"}}}, flat row-major).
func WriteArrays(path string, arrays []tensorio.Named, meta map[string]string) error {
	var write func(w io.Writer) error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		t := arrays[0].Tensor
		if t.DType == tensor.BFloat16 {
			t, _ = tensor.ToFloat32(t)
		}
		write = func(w io.Writer) error { return tensorio.WriteNPY(w, t) }
	case ".safetensors":
		wide := make([]tensorio.Named, len(arrays))
		for i, nt := range arrays {
			wide[i] = tensorio.Named{Name: nt.Name, Tensor: storable(nt.Tensor)}
		}
		write = func(w io.Writer) error { return tensorio.WriteSafetensors(w, wide, meta) }
	default:
		write = func(w io.Writer) error { return writeArraysJSON(w, arrays, meta) }
	}
	if err := tensorio.AtomicWriteFile(path, write); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// storable returns t in a dtype safetensors files hold here: float16 and bfloat16 as float32,
// int8 and uint8 as int32 (both exact).
func storable(t *tensor.Tensor) *tensor.Tensor {
	switch t.DType {
	case tensor.Float16, tensor.BFloat16:
		c, _ := tensor.ToFloat32(t)
		return c
	case tensor.Int8, tensor.Uint8:
		return &tensor.Tensor{DType: tensor.Int32, Shape: t.Shape, I64: t.I64}
	}
	return t
}

func writeArraysJSON(w io.Writer, arrays []tensorio.Named, meta map[string]string) error {
	var buf []byte
	buf = fmt.Appendf(buf, `{"backend":%s,"input":%s,"model":%s,"outputs":{`, str(meta["backend"]), str(meta["input"]), str(meta["model"]))
	for i, nt := range arrays {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = fmt.Appendf(buf, `%s:{"shape":%s,"dtype":%s,"data":[`, str(nt.Name), str(nt.Tensor.Shape), str(nt.Tensor.DType.String()))
		t := nt.Tensor
		for k := 0; k < t.Len(); k++ {
			if k > 0 {
				buf = append(buf, ',')
			}
			switch {
			case t.F32 != nil:
				buf = format.AppendFloat32(buf, t.F32[k])
			case t.I64 != nil:
				buf = fmt.Appendf(buf, "%d", t.I64[k])
			default:
				buf = fmt.Appendf(buf, "%t", t.Bool[k])
			}
		}
		buf = append(buf, "]}"...)
		if len(buf) > 1<<20 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, "}}\n"...)
	_, err := w.Write(buf)
	return err
}
