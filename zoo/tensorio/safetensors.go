package tensorio

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"unicode/utf8"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// MaxSafetensorsHeader is the largest safetensors JSON header the readers accept, in bytes
// (the reference implementation's limit).
const MaxSafetensorsHeader = 100_000_000

// MetadataKey is the reserved header key that holds the string-to-string metadata.
const MetadataKey = "__metadata__"

// Named is a tensor with its name, for writers that take an ordered list.
type Named struct {
	Name   string
	Tensor *tensor.Tensor
}

func stDType(dt tensor.DType) (string, bool) {
	switch dt {
	case tensor.Float32:
		return "F32", true
	case tensor.Int32:
		return "I32", true
	case tensor.Int64:
		return "I64", true
	case tensor.Bool:
		return "BOOL", true
	}
	return "", false
}

func stParseDType(s string) (tensor.DType, bool) {
	switch s {
	case "F32":
		return tensor.Float32, true
	case "I32":
		return tensor.Int32, true
	case "I64":
		return tensor.Int64, true
	case "BOOL":
		return tensor.Bool, true
	}
	return 0, false
}

type stInfo struct {
	DType       string   `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// WriteSafetensorsMap is WriteSafetensors for a map of tensors.
func WriteSafetensorsMap(w io.Writer, tensors map[string]*tensor.Tensor, metadata map[string]string) error {
	list := make([]Named, 0, len(tensors))
	for name, t := range tensors {
		list = append(list, Named{name, t})
	}
	return WriteSafetensors(w, list, metadata)
}

// WriteSafetensors writes tensors and optional metadata to w in the safetensors format: an
// 8-byte little-endian header length, a JSON header (padded with spaces to a multiple of 8
// bytes) and the data. The output is deterministic whatever the order of tensors: the header
// lists metadata first, then tensors by name, and the data is laid out by element size (widest
// first) then name, so every tensor is aligned to its element size. F32, I32, I64 and BOOL are
// written. An empty or duplicate name, the reserved name "__metadata__", a name or metadata
// string that is not valid UTF-8, or an invalid tensor is an error naming it; nothing is
// written then.
func WriteSafetensors(w io.Writer, tensors []Named, metadata map[string]string) error {
	seen := map[string]bool{}
	for _, nt := range tensors {
		switch {
		case nt.Name == "":
			return fmt.Errorf("safetensors: tensor with an empty name")
		case nt.Name == MetadataKey:
			return fmt.Errorf("safetensors: %q is reserved and cannot name a tensor", MetadataKey)
		case !utf8.ValidString(nt.Name):
			return fmt.Errorf("safetensors: tensor name %q is not valid UTF-8", nt.Name)
		case seen[nt.Name]:
			return fmt.Errorf("safetensors: duplicate tensor name %q", nt.Name)
		}
		seen[nt.Name] = true
		if err := nt.Tensor.Check(); err != nil {
			return fmt.Errorf("safetensors: tensor %q: %w", nt.Name, err)
		}
		if _, ok := stDType(nt.Tensor.DType); !ok {
			return fmt.Errorf("safetensors: tensor %q: unsupported dtype %v", nt.Name, nt.Tensor.DType)
		}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("safetensors: metadata %q is not valid UTF-8", k)
		}
	}
	hdr, layout, err := SafetensorsHeader(tensors, metadata)
	if err != nil {
		return err
	}
	bw := newBufWriter(w)
	if _, err := bw.Write(hdr); err != nil {
		return fmt.Errorf("safetensors: write header: %w", err)
	}
	for _, nt := range layout {
		if err := writeData(bw, nt.Tensor); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", nt.Name, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write data: %w", err)
	}
	return nil
}

// SafetensorsHeader returns what WriteSafetensors writes before the data — the 8-byte length
// and the JSON header — and the order in which the tensors' data follows it, from each
// tensor's name, dtype and shape alone (the data may be absent), so that a writer can stream
// the data itself. It does not check the tensors as WriteSafetensors does.
func SafetensorsHeader(tensors []Named, metadata map[string]string) ([]byte, []Named, error) {
	layout := append([]Named(nil), tensors...)
	sort.Slice(layout, func(i, j int) bool {
		si, sj := layout[i].Tensor.DType.Size(), layout[j].Tensor.DType.Size()
		if si != sj {
			return si > sj
		}
		return layout[i].Name < layout[j].Name
	})
	infos := map[string]stInfo{}
	var off int64
	for _, nt := range layout {
		dt, _ := stDType(nt.Tensor.DType)
		size := int64(tensor.NumElements(nt.Tensor.Shape)) * int64(nt.Tensor.DType.Size()) // from the shape: the data may be absent
		shape := nt.Tensor.Shape
		if shape == nil {
			shape = []int{}
		}
		infos[nt.Name] = stInfo{DType: dt, Shape: shape, DataOffsets: [2]int64{off, off + size}}
		off += size
	}

	var hdr bytes.Buffer
	enc := json.NewEncoder(&hdr)
	enc.SetEscapeHTML(false)
	hdr.WriteByte('{')
	first := true
	comma := func() {
		if !first {
			hdr.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		comma()
		_ = enc.Encode(MetadataKey)
		hdr.Truncate(hdr.Len() - 1) // Encode appends a newline
		hdr.WriteByte(':')
		if err := enc.Encode(metadata); err != nil {
			return nil, nil, fmt.Errorf("safetensors: metadata: %w", err)
		}
		hdr.Truncate(hdr.Len() - 1)
	}
	names := make([]string, 0, len(tensors))
	for _, nt := range tensors {
		names = append(names, nt.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		comma()
		_ = enc.Encode(name)
		hdr.Truncate(hdr.Len() - 1)
		hdr.WriteByte(':')
		if err := enc.Encode(infos[name]); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		hdr.Truncate(hdr.Len() - 1)
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}

	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(hdr.Len()))
	return append(lenBuf[:], hdr.Bytes()...), layout, nil
}

// ReadSafetensors parses a complete safetensors file held in data and returns its tensors
// sorted by name and its metadata (nil when the file has none). It is strict: a header length
// beyond MaxSafetensorsHeader or the data, a header that is not one JSON object, duplicate
// names, unknown keys in a tensor entry, a dtype other than F32, I32, I64 or BOOL, a negative
// dimension, offsets that are out of range, overlap, leave holes or do not match the shape,
// bytes after the last tensor, or a bool byte other than 0 or 1 are all errors naming the
// tensor at fault.
func ReadSafetensors(data []byte) ([]Named, map[string]string, error) {
	if len(data) < 8 {
		return nil, nil, fmt.Errorf("safetensors: file of %d bytes is too short for the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n > MaxSafetensorsHeader {
		return nil, nil, fmt.Errorf("safetensors: header length %d is beyond the limit of %d", n, MaxSafetensorsHeader)
	}
	if n > uint64(len(data)-8) {
		return nil, nil, fmt.Errorf("safetensors: header length %d is beyond the end of the %d-byte file", n, len(data))
	}
	return parseSafetensors(data[8:8+n], data[8+n:], false)
}

// ReadSafetensorsFrom reads a complete safetensors file from r, then parses it as
// ReadSafetensors does. The header length is checked against MaxSafetensorsHeader (and, when r
// is an io.Seeker, against the file size) before its buffer is allocated; the data buffer
// grows only as bytes arrive.
func ReadSafetensorsFrom(r io.Reader) ([]Named, map[string]string, error) {
	return readSafetensorsFrom(r, false)
}

// ReadWeightsFrom reads a safetensors file of model weights from r as ReadSafetensorsFrom
// does, and also accepts the floating-point dtypes PyTorch saves half, bfloat16 and double
// models in: F16, BF16 and F64 tensors are converted to F32 (F16 and BF16 exactly, F64 rounded
// to the nearest float32), so that every float tensor it returns is Float32. The checks and
// their errors are ReadSafetensors's.
func ReadWeightsFrom(r io.Reader) ([]Named, map[string]string, error) {
	return readSafetensorsFrom(r, true)
}

// ReadWeightsLimit is ReadWeightsFrom with a memory budget: the header is read and checked
// first, and when the tensors would take more than budget bytes as zoo holds them
// (HeldBytes) it returns a *BudgetError naming the tensor that crosses the budget, before any
// data is read. The data is decoded as it is read, without a copy of the file's bytes.
// budget ≤ 0 is no budget. The checks and their errors are ReadSafetensors's, except that
// data missing from a stream (r not an io.Seeker) is reported when reading reaches its end.
func ReadWeightsLimit(r io.Reader, budget int64) ([]Named, map[string]string, error) {
	hdr, err := readSTHeaderBytes(r)
	if err != nil {
		return nil, nil, err
	}
	entries, meta, err := parseSTHeader(hdr, true)
	if err != nil {
		return nil, nil, err
	}
	bodyLen := int64(-1)
	if s, ok := r.(io.Seeker); ok {
		if left, ok := remaining(s); ok {
			bodyLen = left
		}
	}
	if bodyLen < 0 { // a stream: the offsets must tile the data they declare, then EOF
		bodyLen = 0
		for _, e := range entries {
			bodyLen = max(bodyLen, e.info.DataOffsets[1])
		}
	}
	if err := checkSTOffsets(entries, bodyLen); err != nil {
		return nil, nil, err
	}
	var total int64
	for _, e := range entries {
		need := HeldBytes(e.dt, tensor.NumElements(e.info.Shape))
		total += need
		if budget > 0 && total > budget {
			return nil, nil, &BudgetError{Format: "safetensors", Item: fmt.Sprintf("tensor %q", clip(e.name)), Need: need, Total: total, Budget: budget}
		}
	}
	out := make([]Named, 0, len(entries))
	for _, e := range entries { // in offset order (checkSTOffsets sorted them)
		decode := func(t *tensor.Tensor, data []byte, at int) error {
			return decodeInto(t, npyType{e.dt, e.size}, data, at)
		}
		if _, wide := wideDTypes[e.info.DType]; wide {
			decode = func(t *tensor.Tensor, data []byte, at int) error {
				decodeWideInto(t, e.info.DType, data, at)
				return nil
			}
		}
		t, err := readInto(r, e.dt, e.size, e.info.Shape, decode)
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", e.name, err)
		}
		out = append(out, Named{e.name, t})
	}
	var one [1]byte
	if k, _ := io.ReadFull(r, one[:]); k > 0 {
		return nil, nil, fmt.Errorf("safetensors: bytes after the last tensor (tensors cover %d)", bodyLen)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, meta, nil
}

// readSTHeaderBytes reads the 8-byte header length and the header.
func readSTHeaderBytes(r io.Reader) ([]byte, error) {
	var lenBuf [8]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("safetensors: reading header length: %w", noEOF(err))
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxSafetensorsHeader {
		return nil, fmt.Errorf("safetensors: header length %d is beyond the limit of %d", n, MaxSafetensorsHeader)
	}
	if s, ok := r.(io.Seeker); ok {
		if left, ok := remaining(s); ok && uint64(left) < n {
			return nil, fmt.Errorf("safetensors: header length %d is beyond the end of the %d-byte file", n, left+8)
		}
	}
	hdr, err := readUpTo(r, int64(n))
	if err != nil {
		return nil, fmt.Errorf("safetensors: reading header: %w", err)
	}
	if uint64(len(hdr)) != n {
		return nil, fmt.Errorf("safetensors: header length %d is beyond the end of the %d-byte file", n, len(hdr)+8)
	}
	return hdr, nil
}

func readSafetensorsFrom(r io.Reader, widen bool) ([]Named, map[string]string, error) {
	hdr, err := readSTHeaderBytes(r)
	if err != nil {
		return nil, nil, err
	}
	body, err := readUpTo(r, math.MaxInt64)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: reading data: %w", err)
	}
	return parseSafetensors(hdr, body, widen)
}

// wideDTypes are the safetensors float dtypes that ReadWeightsFrom converts to F32, with
// their element sizes.
var wideDTypes = map[string]int{"F16": 2, "BF16": 2, "F64": 8}

// stEntry is one tensor of a safetensors header.
type stEntry struct {
	name string
	dt   tensor.DType
	size int // bytes per element in the file
	info stInfo
}

// parseSafetensors parses a header and the data after it; widen accepts wideDTypes.
func parseSafetensors(hdr, body []byte, widen bool) ([]Named, map[string]string, error) {
	entries, meta, err := parseSTHeader(hdr, widen)
	if err != nil {
		return nil, nil, err
	}
	if err := checkSTOffsets(entries, int64(len(body))); err != nil {
		return nil, nil, err
	}
	out := make([]Named, 0, len(entries))
	for _, e := range entries {
		raw := body[e.info.DataOffsets[0]:e.info.DataOffsets[1]]
		var t *tensor.Tensor
		var err error
		if _, wide := wideDTypes[e.info.DType]; wide {
			t, err = decodeWide(e.info.DType, e.info.Shape, raw)
		} else {
			t, err = decodeData(npyType{e.dt, e.size}, e.info.Shape, raw)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", e.name, err)
		}
		out = append(out, Named{e.name, t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, meta, nil
}

// parseSTHeader parses a safetensors JSON header into its entries and metadata.
func parseSTHeader(hdr []byte, widen bool) ([]stEntry, map[string]string, error) {
	if !utf8.Valid(hdr) {
		return nil, nil, fmt.Errorf("safetensors: header is not valid UTF-8")
	}
	trimmed := bytes.TrimRight(hdr, " ")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil, fmt.Errorf("safetensors: header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("safetensors: header is not a JSON object")
	}
	var entries []stEntry
	var meta map[string]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("safetensors: header JSON: %w", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, nil, fmt.Errorf("safetensors: header names %q twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("safetensors: header JSON at %q: %w", name, noEOF(err))
		}
		if name == MetadataKey {
			if err := strictUnmarshal(raw, &meta); err != nil {
				return nil, nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		if name == "" {
			return nil, nil, fmt.Errorf("safetensors: header has a tensor with an empty name")
		}
		var fields map[string]json.RawMessage
		if err := strictUnmarshal(raw, &fields); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: entry is not an object: %w", name, err)
		}
		var unknown []string
		for k := range fields {
			if k != "dtype" && k != "shape" && k != "data_offsets" {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 { // the first in order, so that the message does not change
			sort.Strings(unknown)
			return nil, nil, fmt.Errorf("safetensors: tensor %q: unknown key %q", name, unknown[0])
		}
		var info stInfo
		var offs []int64
		for _, k := range []string{"dtype", "shape", "data_offsets"} {
			v, ok := fields[k]
			if !ok {
				return nil, nil, fmt.Errorf("safetensors: tensor %q: missing %q", name, k)
			}
			var dst any
			switch k {
			case "dtype":
				dst = &info.DType
			case "shape":
				dst = &info.Shape
			default:
				dst = &offs
			}
			if err := strictUnmarshal(v, dst); err != nil || (k == "data_offsets" && len(offs) != 2) {
				return nil, nil, fmt.Errorf("safetensors: tensor %q: bad %s %s", name, k, clip(string(v)))
			}
		}
		info.DataOffsets = [2]int64{offs[0], offs[1]}
		if info.Shape == nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: shape is null", name)
		}
		dt, ok := stParseDType(info.DType)
		size := dt.Size()
		if w, wide := wideDTypes[info.DType]; wide && widen {
			dt, size, ok = tensor.Float32, w, true
		}
		if !ok {
			if widen {
				return nil, nil, fmt.Errorf("safetensors: tensor %q: unsupported dtype %q (zoo reads F32, F16, BF16, F64, I32, I64, BOOL)", name, info.DType)
			}
			return nil, nil, fmt.Errorf("safetensors: tensor %q: unsupported dtype %q (zoo reads F32, I32, I64, BOOL)", name, info.DType)
		}
		entries = append(entries, stEntry{name, dt, size, info})
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("safetensors: header JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("safetensors: header has data after its JSON object")
	}

	return entries, meta, nil
}

// checkSTOffsets checks the entries' offsets against the bodyLen data bytes: each within the
// data, matching its shape, together tiling the data exactly. It sorts entries by offset.
func checkSTOffsets(entries []stEntry, bodyLen int64) error {
	for _, e := range entries {
		b, end := e.info.DataOffsets[0], e.info.DataOffsets[1]
		if b < 0 || end < b || end > bodyLen {
			return fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] outside the %d data bytes", e.name, b, end, bodyLen)
		}
		elems := int64(1)
		for _, d := range e.info.Shape {
			if d < 0 {
				return fmt.Errorf("safetensors: tensor %q: negative dimension in shape %v", e.name, e.info.Shape)
			}
			if d > 0 && elems > MaxElements/int64(d) {
				return fmt.Errorf("safetensors: tensor %q: shape %v has more than 2^31 elements", e.name, e.info.Shape)
			}
			elems *= int64(d)
		}
		if want := elems * int64(e.size); end-b != want {
			return fmt.Errorf("safetensors: tensor %q: shape %v of %s needs %d bytes, data_offsets [%d, %d] hold %d", e.name, e.info.Shape, e.info.DType, want, b, end, end-b)
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		oi, oj := entries[i].info.DataOffsets, entries[j].info.DataOffsets
		if oi[0] != oj[0] {
			return oi[0] < oj[0]
		}
		return oi[1] < oj[1]
	})
	var pos int64
	for _, e := range entries {
		if e.info.DataOffsets[0] != pos {
			if e.info.DataOffsets[0] < pos {
				return fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] overlap another tensor", e.name, e.info.DataOffsets[0], e.info.DataOffsets[1])
			}
			return fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] leave a hole after byte %d", e.name, e.info.DataOffsets[0], e.info.DataOffsets[1], pos)
		}
		pos = e.info.DataOffsets[1]
	}
	if pos != bodyLen {
		return fmt.Errorf("safetensors: %d bytes after the last tensor (data is %d bytes, tensors cover %d)", bodyLen-pos, bodyLen, pos)
	}

	return nil
}

// strictUnmarshal decodes one JSON value, rejecting trailing data.
func strictUnmarshal(raw []byte, dst any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("null")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// Lookup returns the tensor called name in list, or nil.
func Lookup(list []Named, name string) *tensor.Tensor {
	for _, nt := range list {
		if nt.Name == name {
			return nt.Tensor
		}
	}
	return nil
}

// decodeWide converts F16, BF16 or F64 data to a Float32 tensor.
func decodeWide(dtype string, shape []int, data []byte) (*tensor.Tensor, error) {
	t, err := tensor.New(tensor.Float32, shape...)
	if err != nil {
		return nil, err
	}
	decodeWideInto(t, dtype, data, 0)
	return t, nil
}

// decodeWideInto converts F16, BF16 or F64 data into t's elements from at on.
func decodeWideInto(t *tensor.Tensor, dtype string, data []byte, at int) {
	switch dtype {
	case "F16":
		for i, d := 0, t.F32[at:at+len(data)/2]; i < len(d); i++ {
			d[i] = tensor.Float16FromBits(binary.LittleEndian.Uint16(data[2*i:]))
		}
	case "BF16":
		for i, d := 0, t.F32[at:at+len(data)/2]; i < len(d); i++ {
			d[i] = tensor.BFloat16FromBits(binary.LittleEndian.Uint16(data[2*i:]))
		}
	case "F64":
		for i, d := 0, t.F32[at:at+len(data)/8]; i < len(d); i++ {
			d[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])))
		}
	}
}
