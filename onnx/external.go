package onnx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
)

// ImportFile reads the ONNX model at path and imports it like Import, with two things only
// a file has: tensors whose data is stored in external files (ONNX's external data: the
// location, offset and length keys) are read from the model's folder, and a Git LFS pointer
// saved under the model's name is named as one.
//
// External locations must be relative paths inside the model's folder: an absolute path, a
// path with "..", or a symbolic link that leads outside the folder is refused, as is an
// offset or length beyond the end of the data file. Errors start with "import onnx:".
func ImportFile(path string) (*graph.Graph, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("import onnx: %w", err)
	}
	g, err := importModelIn(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("import onnx: %w", err)
	}
	return g, nil
}

// ReadFile returns the ONNX model at path as self-contained bytes: tensors whose data is in
// external files (read from the model's folder as ImportFile reads them) carry it in
// raw_data, so that Import and ONNX Runtime's loader from bytes take the model whole. A model
// without external data is returned as the file holds it. The result must stay under
// protobuf's 2 GiB limit; errors start with "read onnx:".
func ReadFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read onnx: %w", err)
	}
	if err := lfsPointer(data); err != nil {
		return nil, fmt.Errorf("read onnx: %w", err)
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(data, &m); err != nil || len(externalTensors(&m)) == 0 {
		return data, nil // Import names what is wrong with the bytes
	}
	if err := loadExternalData(&m, filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("read onnx: %w", err)
	}
	if size := proto.Size(&m); size >= math.MaxInt32 {
		return nil, fmt.Errorf("read onnx: %s with its external data is %d bytes, over protobuf's 2 GiB limit for one model", path, size)
	}
	out, err := proto.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("read onnx: %w", err)
	}
	return out, nil
}

// lfsPointerPrefix starts every Git LFS pointer file (git-lfs's spec, v1).
const lfsPointerPrefix = "version https://git-lfs.github.com/spec/v1"

// lfsPointer returns an error naming data as a Git LFS pointer when it is one.
func lfsPointer(data []byte) error {
	if len(data) < 1024 && bytes.HasPrefix(data, []byte(lfsPointerPrefix)) {
		return errors.New("this file is a Git LFS pointer, not the model: run git lfs pull (in the repository it came from) to fetch the model itself")
	}
	return nil
}

// externalTensors returns every tensor of m whose data is external: the graph's
// initializers and the tensor attributes of its nodes.
func externalTensors(m *onnxpb.ModelProto) []*onnxpb.TensorProto {
	var out []*onnxpb.TensorProto
	add := func(tp *onnxpb.TensorProto) {
		if tp != nil && (tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL || len(tp.GetExternalData()) > 0) {
			out = append(out, tp)
		}
	}
	for _, tp := range m.GetGraph().GetInitializer() {
		add(tp)
	}
	for _, np := range m.GetGraph().GetNode() {
		for _, ap := range np.GetAttribute() {
			add(ap.GetT())
		}
	}
	return out
}

// loadExternalData replaces the external data of m's tensors by raw_data read from files in
// dir, opened through an os.Root so that no path or link leads outside it. With dir == ""
// (bytes without a file) external data is refused by the tensor checks instead.
func loadExternalData(m *onnxpb.ModelProto, dir string) error {
	ext := externalTensors(m)
	if len(ext) == 0 || dir == "" {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("external data: open the model's folder: %w", err)
	}
	defer root.Close()
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, tp := range ext {
		if err := readExternal(root, files, tp); err != nil {
			return fmt.Errorf("tensor %q: external data: %w", tp.GetName(), err)
		}
	}
	return nil
}

func readExternal(root *os.Root, files map[string]*os.File, tp *onnxpb.TensorProto) error {
	var loc string
	offset, length := int64(0), int64(-1)
	for _, kv := range tp.GetExternalData() {
		var err error
		switch kv.GetKey() {
		case "location":
			loc = kv.GetValue()
		case "offset":
			offset, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		case "length":
			length, err = strconv.ParseInt(kv.GetValue(), 10, 64)
		}
		if err != nil || offset < 0 || (kv.GetKey() == "length" && length < 0) {
			return fmt.Errorf("%s %q is not a non-negative integer", kv.GetKey(), kv.GetValue())
		}
	}
	switch {
	case loc == "":
		return errors.New("no location given")
	case filepath.IsAbs(loc) || strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, `\`):
		return fmt.Errorf("location %q is an absolute path; zoo reads external data only from the model's folder", loc)
	case !filepath.IsLocal(filepath.FromSlash(loc)):
		return fmt.Errorf("location %q leads outside the model's folder", loc)
	}
	f := files[loc]
	if f == nil {
		var err error
		if f, err = root.Open(filepath.FromSlash(loc)); err != nil {
			return fmt.Errorf("location %q: %w (it must be a file in the model's folder; a link may not lead outside it)", loc, errors.Unwrap(err))
		}
		files[loc] = f
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("location %q: %w", loc, err)
	}
	if length < 0 {
		length = st.Size() - offset
	}
	if offset > st.Size() || length > st.Size()-offset {
		return fmt.Errorf("offset %d and length %d lie beyond the end of %q (%d bytes)", offset, length, loc, st.Size())
	}
	if length > maxElements*8 {
		return fmt.Errorf("length %d exceeds the largest tensor zoo reads", length)
	}
	raw := make([]byte, length)
	if _, err := f.ReadAt(raw, offset); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read %q: %w", loc, err)
	}
	tp.RawData = raw
	tp.ExternalData = nil
	tp.DataLocation = onnxpb.TensorProto_DEFAULT
	return nil
}
