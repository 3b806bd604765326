// Package tensorio writes and reads tensors in the formats users load elsewhere — numpy's
// .npy and Hugging Face's .safetensors — and writes files atomically (temp file, fsync,
// rename), so a failed run never leaves a half-written output behind.
//
// The readers parse untrusted bytes: headers are bounded, every declared size is checked
// against the data actually present before large buffers are allocated, and malformed input
// is an error, never a panic.
package tensorio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// MaxNPYHeader is the largest .npy header ReadNPY accepts, in bytes (numpy's own default
// limit is 10000).
const MaxNPYHeader = 1 << 16

// MaxElements is the largest element count the readers accept (tensor.New's limit).
const MaxElements = 1 << 31

const npyMagic = "\x93NUMPY"

// npyDescr maps dtypes to the numpy type strings WriteNPY writes (numpy's own spelling).
func npyDescr(dt tensor.DType) (string, bool) {
	switch dt {
	case tensor.Float32:
		return "<f4", true
	case tensor.Float16:
		return "<f2", true
	case tensor.Int32:
		return "<i4", true
	case tensor.Int64:
		return "<i8", true
	case tensor.Int8:
		return "|i1", true
	case tensor.Uint8:
		return "|u1", true
	case tensor.Bool:
		return "|b1", true
	}
	return "", false
}

// npyType is a numpy type string ReadNPY accepts: the tensor dtype it becomes and the size of
// one element in the file.
type npyType struct {
	dt   tensor.DType
	size int
}

// String names the file's element type: the dtype's name, or float64 for one read as float32.
func (t npyType) String() string {
	if t.dt == tensor.Float32 && t.size == 8 {
		return "float64"
	}
	return t.dt.String()
}

// npyTypes are the type strings ReadNPY reads. float64 becomes float32 (rounded to nearest):
// zoo computes in float32. One-byte types carry no byte order, which numpy writes as '|' but
// '<' and '=' also mean.
var npyTypes = map[string]npyType{
	"<f4": {tensor.Float32, 4}, "<f8": {tensor.Float32, 8}, "<f2": {tensor.Float16, 2},
	"<i8": {tensor.Int64, 8}, "<i4": {tensor.Int32, 4},
	"|i1": {tensor.Int8, 1}, "<i1": {tensor.Int8, 1}, "=i1": {tensor.Int8, 1},
	"|u1": {tensor.Uint8, 1}, "<u1": {tensor.Uint8, 1}, "=u1": {tensor.Uint8, 1},
	"|b1": {tensor.Bool, 1}, "<b1": {tensor.Bool, 1}, "=b1": {tensor.Bool, 1},
}

const npyTypeList = "'<f4', '<f8', '<f2', '<i8', '<i4', '|i1', '|u1', '|b1'"

// NPYHeader returns the complete .npy v1.0 header (magic, version, length and the padded
// dictionary) for a C-order array of dtype and shape, byte-identical to what numpy.save writes.
// It returns an error for a dtype .npy cannot hold or a negative dimension.
func NPYHeader(dt tensor.DType, shape []int) ([]byte, error) {
	descr, ok := npyDescr(dt)
	if !ok {
		return nil, fmt.Errorf("npy: unsupported dtype %v", dt)
	}
	var sb strings.Builder
	sb.WriteString("(")
	for i, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("npy: negative dimension in shape %v", shape)
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString(")")
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, sb.String())
	// numpy leaves room to grow the first axis in place (GROWTH_AXIS_MAX_DIGITS = 21) and pads
	// the whole header with spaces and a final newline to a multiple of 64 bytes.
	if len(shape) > 0 {
		dict += strings.Repeat(" ", max(0, 21-len(strconv.Itoa(shape[0]))))
	}
	hlen := len(dict) + 1
	pad := 64 - (len(npyMagic)+2+2+hlen)%64
	if pad == 64 {
		pad = 0
	}
	hlen += pad
	if hlen > math.MaxUint16 {
		return nil, fmt.Errorf("npy: header of %d bytes is too long for format 1.0", hlen)
	}
	out := make([]byte, 0, 10+hlen)
	out = append(out, npyMagic...)
	out = append(out, 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(hlen))
	out = append(out, dict...)
	out = append(out, bytes.Repeat([]byte{' '}, pad)...)
	out = append(out, '\n')
	return out, nil
}

// WriteNPY writes t to w as a numpy .npy file (format 1.0, little-endian, C order): float32 as
// '<f4', float16 as '<f2', int64 as '<i8', int32 as '<i4', int8 as '|i1', uint8 as '|u1', bool
// as '|b1'. np.load reads the result. It returns an error for an invalid tensor (nil, a dtype
// .npy cannot hold such as bfloat16, data not matching the shape, an integer out of its type's
// range) or a write error.
func WriteNPY(w io.Writer, t *tensor.Tensor) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	hdr, err := NPYHeader(t.DType, t.Shape)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.Write(hdr); err != nil {
		return fmt.Errorf("npy: write header: %w", err)
	}
	if err := writeData(bw, t); err != nil {
		return fmt.Errorf("npy: write data: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("npy: write data: %w", err)
	}
	return nil
}

// writeData writes t's elements little-endian in row-major order.
func writeData(w *bufio.Writer, t *tensor.Tensor) error {
	var b [8]byte
	switch t.DType {
	case tensor.Float32:
		for _, v := range t.F32 {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			if _, err := w.Write(b[:4]); err != nil {
				return err
			}
		}
	case tensor.Int32:
		for _, v := range t.I64 {
			if v < math.MinInt32 || v > math.MaxInt32 {
				return fmt.Errorf("int32 tensor holds %d, out of range", v)
			}
			binary.LittleEndian.PutUint32(b[:], uint32(int32(v)))
			if _, err := w.Write(b[:4]); err != nil {
				return err
			}
		}
	case tensor.Int64:
		for _, v := range t.I64 {
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			if _, err := w.Write(b[:8]); err != nil {
				return err
			}
		}
	case tensor.Float16:
		for _, v := range t.F32 {
			binary.LittleEndian.PutUint16(b[:], tensor.Float16Bits(v))
			if _, err := w.Write(b[:2]); err != nil {
				return err
			}
		}
	case tensor.Int8, tensor.Uint8:
		lo, hi := int64(math.MinInt8), int64(math.MaxInt8)
		if t.DType == tensor.Uint8 {
			lo, hi = 0, math.MaxUint8
		}
		for _, v := range t.I64 {
			if v < lo || v > hi {
				return fmt.Errorf("%v tensor holds %d, out of range", t.DType, v)
			}
			if err := w.WriteByte(byte(v)); err != nil {
				return err
			}
		}
	case tensor.Bool:
		for _, v := range t.Bool {
			c := byte(0)
			if v {
				c = 1
			}
			if err := w.WriteByte(c); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unsupported dtype %v", t.DType)
	}
	return nil
}

// ReadNPY reads one .npy array (format 1.0, 2.0 or 3.0) from r, which must end after the data.
// Accepted dtypes, in C order: '<f4' (float32), '<f8' (float64, returned as float32 rounded to
// nearest), '<f2' (float16), '<i8', '<i4', '|i1', '|u1' and '|b1'. Anything else — a bad magic,
// a header longer than MaxNPYHeader, a malformed header dictionary, Fortran order, a
// big-endian, object, structured or other dtype, more than MaxElements elements, data shorter
// or longer than the shape declares, a bool byte other than 0 or 1 — is an error saying what
// is wrong. When r is
// an io.Seeker (such as *os.File or *bytes.Reader) the data size is checked before the data
// buffer is allocated; otherwise the buffer grows only as data actually arrives.
func ReadNPY(r io.Reader) (*tensor.Tensor, error) {
	return readNPY(r, -1, 0)
}

// ReadNPYLimit is ReadNPY with a memory budget: an array that would take more than budget
// bytes as zoo holds it (HeldBytes) is a *BudgetError, returned after reading only the
// header. budget ≤ 0 is no budget. With a known data size (r is an io.Seeker) the array is
// decoded as it is read, without a copy of the file's bytes.
func ReadNPYLimit(r io.Reader, budget int64) (*tensor.Tensor, error) {
	return readNPY(r, -1, budget)
}

// npyHeaderLen is the bytes before the data of a .npy whose header dictionary is hlen bytes.
func npyHeaderLen(major byte, hlen int) int64 {
	if major == 1 {
		return int64(10 + hlen)
	}
	return int64(12 + hlen)
}

// readNPY reads a .npy from r; rest is the number of bytes r holds in all, header included
// (-1: not known, then an io.Seeker tells); budget is ReadNPYLimit's.
func readNPY(r io.Reader, rest, budget int64) (*tensor.Tensor, error) {
	typ, shape, hdrLen, err := readNPYHeader(r)
	if err != nil {
		return nil, err
	}
	n := tensor.NumElements(shape)
	size := int64(n) * int64(typ.size)
	left := int64(-1)
	if rest >= 0 {
		left = rest - hdrLen
	} else if s, ok := r.(io.Seeker); ok {
		if l, ok := remaining(s); ok {
			left = l
		}
	}
	if left >= 0 && left != size {
		return nil, fmt.Errorf("npy: shape %v of %v needs %d data bytes, file has %d", shape, typ, size, left)
	}
	if need := HeldBytes(typ.dt, n); budget > 0 && need > budget {
		return nil, &BudgetError{Format: "npy", Item: fmt.Sprintf("array %v %v", typ, shape), Need: need, Total: need, Budget: budget}
	}
	var t *tensor.Tensor
	if left >= 0 {
		// The size is known and matches: decode as the bytes arrive.
		if t, err = readData(r, typ, shape); err != nil {
			return nil, err
		}
	} else {
		data, err := readUpTo(r, size)
		if err != nil {
			return nil, fmt.Errorf("npy: reading data: %w", err)
		}
		if int64(len(data)) != size {
			return nil, fmt.Errorf("npy: shape %v of %v needs %d data bytes, file has %d", shape, typ, size, len(data))
		}
		if t, err = decodeData(typ, shape, data); err != nil {
			return nil, fmt.Errorf("npy: %w", err)
		}
	}
	var one [1]byte
	if k, _ := io.ReadFull(r, one[:]); k > 0 {
		return nil, fmt.Errorf("npy: trailing bytes after the %d data bytes of shape %v", size, shape)
	}
	return t, nil
}

// readNPYHeader reads the magic, version and header dictionary, and returns the array's type
// and shape and the number of bytes read.
func readNPYHeader(r io.Reader) (npyType, []int, int64, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return npyType{}, nil, 0, fmt.Errorf("npy: reading magic: %w", noEOF(err))
	}
	if string(pre[:6]) != npyMagic {
		return npyType{}, nil, 0, fmt.Errorf("npy: not a .npy file (bad magic %q)", pre[:6])
	}
	major, minor := pre[6], pre[7]
	var hlen int
	switch {
	case major == 1 && minor == 0:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return npyType{}, nil, 0, fmt.Errorf("npy: reading header length: %w", noEOF(err))
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case (major == 2 || major == 3) && minor == 0:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return npyType{}, nil, 0, fmt.Errorf("npy: reading header length: %w", noEOF(err))
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n > MaxNPYHeader {
			return npyType{}, nil, 0, fmt.Errorf("npy: header of %d bytes is longer than the limit of %d", n, MaxNPYHeader)
		}
		hlen = int(n)
	default:
		return npyType{}, nil, 0, fmt.Errorf("npy: unsupported format version %d.%d", major, minor)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return npyType{}, nil, 0, fmt.Errorf("npy: reading %d-byte header: %w", hlen, noEOF(err))
	}
	typ, shape, err := parseNPYHeader(hdr, major)
	if err != nil {
		return npyType{}, nil, 0, fmt.Errorf("npy: %w", err)
	}
	return typ, shape, npyHeaderLen(major, hlen), nil
}

// readData allocates the tensor and decodes the data into it as it is read.
func readData(r io.Reader, typ npyType, shape []int) (*tensor.Tensor, error) {
	t, err := readInto(r, typ.dt, typ.size, shape, func(t *tensor.Tensor, data []byte, at int) error {
		return decodeInto(t, typ, data, at)
	})
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	return t, nil
}

// readInto allocates a tensor of dt and shape and fills it with decode from r's data, size
// bytes an element, read in pieces of 64 KiB; r must hold at least the data.
func readInto(r io.Reader, dt tensor.DType, size int, shape []int, decode func(t *tensor.Tensor, data []byte, at int) error) (*tensor.Tensor, error) {
	t, err := tensor.New(dt, shape...)
	if err != nil {
		return nil, err
	}
	n := tensor.NumElements(shape)
	per := max(1, (64<<10)/size)
	buf := make([]byte, min(n, per)*size)
	for at := 0; at < n; {
		k := min(per, n-at)
		if _, err := io.ReadFull(r, buf[:k*size]); err != nil {
			return nil, fmt.Errorf("reading data: %w", noEOF(err))
		}
		if err := decode(t, buf[:k*size], at); err != nil {
			return nil, err
		}
		at += k
	}
	return t, nil
}

// HeldBytes is the memory n elements of dt take in a zoo tensor: 4 bytes a float (float16 and
// bfloat16 are held as float32), 8 an integer, 1 a bool.
func HeldBytes(dt tensor.DType, n int) int64 {
	switch dt {
	case tensor.Bool:
		return int64(n)
	case tensor.Int32, tensor.Int64, tensor.Int8, tensor.Uint8:
		return 8 * int64(n)
	}
	return 4 * int64(n)
}

// BudgetError is an array that does not fit the memory budget a reader was given. It is
// returned before the array's data is read (or, in an archive, inflated).
type BudgetError struct {
	Format string // "npy", "npz" or "safetensors"
	Item   string // what does not fit: `member "x.npy"`, `tensor "w"`, `array float32 [2 3]`
	Need   int64  // the bytes the item takes in memory
	Total  int64  // the bytes of every array read with it, this one included
	Budget int64
	// Source, when set, says where the budget comes from ("MemAvailable",
	// "ZOO_MEMORY_LIMIT=1GiB"); the caller that chose the budget sets it.
	Source string
}

func (e *BudgetError) Error() string {
	total, budget := memlimit.Bytes(e.Total), memlimit.Bytes(e.Budget)
	if total == budget { // 1.0 KiB, more than 1.0 KiB: say the bytes
		total, budget = fmt.Sprintf("%s (%d bytes)", total, e.Total), fmt.Sprintf("%s (%d bytes)", budget, e.Budget)
	}
	if e.Source != "" {
		budget += " (" + e.Source + ")"
	}
	if e.Total > e.Need {
		return fmt.Sprintf("%s: %s takes %s in memory, which brings the arrays to %s, more than the memory budget of %s",
			e.Format, e.Item, memlimit.Bytes(e.Need), total, budget)
	}
	return fmt.Sprintf("%s: %s takes %s in memory, more than the memory budget of %s", e.Format, e.Item, total, budget)
}

// noEOF turns a bare io.EOF into io.ErrUnexpectedEOF: every caller needed more bytes.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// remaining returns the bytes left after the current position of a seeker.
func remaining(s io.Seeker) (int64, bool) {
	cur, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, false
	}
	end, err := s.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, false
	}
	if _, err := s.Seek(cur, io.SeekStart); err != nil {
		return 0, false
	}
	return end - cur, true
}

// readUpTo reads up to n bytes, growing its buffer only as data arrives (at most 1 MiB ahead),
// so a huge declared size cannot allocate more than the data really present.
func readUpTo(r io.Reader, n int64) ([]byte, error) {
	const chunk = 1 << 20
	buf := make([]byte, 0, min(n, chunk))
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grow := min(n-int64(len(buf)), max(chunk, int64(len(buf))))
			buf = append(buf, make([]byte, grow)...)[:len(buf)]
		}
		end := min(int64(cap(buf)), n)
		k, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// decodeData turns little-endian bytes of file type typ into a tensor; len(data) must
// already match.
func decodeData(typ npyType, shape []int, data []byte) (*tensor.Tensor, error) {
	t, err := tensor.New(typ.dt, shape...)
	if err != nil {
		return nil, err
	}
	if err := decodeInto(t, typ, data, 0); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeInto decodes the little-endian bytes of file type typ into t's elements from at on.
func decodeInto(t *tensor.Tensor, typ npyType, data []byte, at int) error {
	k := len(data) / typ.size
	switch {
	case typ.dt == tensor.Float32 && typ.size == 8:
		for i, d := 0, t.F32[at:at+k]; i < k; i++ {
			d[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])))
		}
	case typ.dt == tensor.Float32:
		for i, d := 0, t.F32[at:at+k]; i < k; i++ {
			d[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case typ.dt == tensor.Float16:
		for i, d := 0, t.F32[at:at+k]; i < k; i++ {
			// Rounded once more so that a signalling NaN reads as the quiet NaN that writing
			// it back produces.
			d[i] = tensor.RoundFloat16(tensor.Float16FromBits(binary.LittleEndian.Uint16(data[2*i:])))
		}
	case typ.dt == tensor.Int32:
		for i, d := 0, t.I64[at:at+k]; i < k; i++ {
			d[i] = int64(int32(binary.LittleEndian.Uint32(data[4*i:])))
		}
	case typ.dt == tensor.Int64:
		for i, d := 0, t.I64[at:at+k]; i < k; i++ {
			d[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
	case typ.dt == tensor.Int8:
		for i, c := range data {
			t.I64[at+i] = int64(int8(c))
		}
	case typ.dt == tensor.Uint8:
		for i, c := range data {
			t.I64[at+i] = int64(c)
		}
	case typ.dt == tensor.Bool:
		for i, c := range data {
			if c > 1 {
				return fmt.Errorf("bool element %d is byte 0x%02x, want 0 or 1", at+i, c)
			}
			t.Bool[at+i] = c == 1
		}
	}
	return nil
}

// parseNPYHeader parses the header dictionary, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
func parseNPYHeader(hdr []byte, major byte) (npyType, []int, error) {
	if major < 3 {
		for _, c := range hdr {
			if c >= 0x80 {
				return npyType{}, nil, fmt.Errorf("header is not ASCII")
			}
		}
	}
	s := strings.TrimRight(string(hdr), " \t\n\x00")
	if !strings.HasSuffix(string(hdr), "\n") {
		return npyType{}, nil, fmt.Errorf("header does not end with a newline")
	}
	p := &pyParser{s: s}
	keys, err := p.dict()
	if err != nil {
		return npyType{}, nil, fmt.Errorf("malformed header %q: %w", clip(s), err)
	}
	if p.skipSpace(); p.i != len(p.s) {
		return npyType{}, nil, fmt.Errorf("malformed header %q: unexpected %q after the dictionary", clip(s), clip(p.s[p.i:]))
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if _, ok := keys[k]; !ok {
			return npyType{}, nil, fmt.Errorf("header has no %q key", k)
		}
	}
	if len(keys) != 3 {
		for k := range keys {
			if k != "descr" && k != "fortran_order" && k != "shape" {
				return npyType{}, nil, fmt.Errorf("header has unknown key %q", k)
			}
		}
	}
	descr, ok := keys["descr"].(string)
	if !ok {
		return npyType{}, nil, fmt.Errorf("header 'descr' is not a string (structured dtypes are not supported)")
	}
	typ, ok := npyTypes[descr]
	switch {
	case ok:
	case strings.HasPrefix(descr, ">") && len(descr) > 1 && npyTypes["<"+descr[1:]].size > 0:
		return npyType{}, nil, fmt.Errorf("big-endian dtype %q is not supported (save with a.astype(a.dtype.newbyteorder('<')))", descr)
	case strings.Contains(descr, "O"):
		return npyType{}, nil, fmt.Errorf("object arrays (dtype %q) are not supported: save a numeric array", descr)
	default:
		return npyType{}, nil, fmt.Errorf("unsupported dtype %q (zoo reads %s)", descr, npyTypeList)
	}
	fo, ok := keys["fortran_order"].(bool)
	if !ok {
		return npyType{}, nil, fmt.Errorf("header 'fortran_order' is not True or False")
	}
	if fo {
		return npyType{}, nil, fmt.Errorf("Fortran-order arrays are not supported (save with np.ascontiguousarray)")
	}
	shape, ok := keys["shape"].([]int)
	if !ok {
		return npyType{}, nil, fmt.Errorf("header 'shape' is not a tuple of integers")
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return npyType{}, nil, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d > 0 && n > MaxElements/int64(d) {
			return npyType{}, nil, fmt.Errorf("shape %v has more than 2^31 elements", shape)
		}
		n *= int64(d)
	}
	if n > MaxElements {
		return npyType{}, nil, fmt.Errorf("shape %v has more than 2^31 elements", shape)
	}
	return typ, shape, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// pyParser parses the Python-literal subset that .npy headers use: a dict with string keys
// and values that are strings, True/False or tuples of non-negative integers.
type pyParser struct {
	s string
	i int
}

var errSyntax = errors.New("syntax error")

func (p *pyParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) dict() (map[string]any, error) {
	if !p.eat('{') {
		return nil, fmt.Errorf("want '{' at byte %d", p.i)
	}
	out := map[string]any{}
	for {
		if p.eat('}') {
			return out, nil
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		if !p.eat(':') {
			return nil, fmt.Errorf("want ':' after key %q", k)
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out[k] = v
		if !p.eat(',') {
			if p.eat('}') {
				return out, nil
			}
			return nil, fmt.Errorf("want ',' or '}' at byte %d", p.i)
		}
	}
}

func (p *pyParser) str() (string, error) {
	p.skipSpace()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("want a quoted string at byte %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at byte %d", p.i)
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsRune(v, '\\') {
		return "", fmt.Errorf("escapes in header strings are not supported")
	}
	p.i += end + 2
	return v, nil
}

func (p *pyParser) value() (any, error) {
	p.skipSpace()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("want a value at end of header")
	}
	switch c := p.s[p.i]; {
	case c == '\'' || c == '"':
		return p.str()
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	case c == '(':
		p.i++
		var dims []int
		for {
			if p.eat(')') {
				if dims == nil {
					dims = []int{}
				}
				return dims, nil
			}
			d, err := p.int()
			if err != nil {
				return nil, err
			}
			dims = append(dims, d)
			if !p.eat(',') {
				if p.eat(')') {
					return dims, nil
				}
				return nil, fmt.Errorf("want ',' or ')' in shape at byte %d", p.i)
			}
		}
	}
	return nil, fmt.Errorf("unexpected %q at byte %d", p.s[p.i], p.i)
}

func (p *pyParser) int() (int, error) {
	p.skipSpace()
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if start == p.i {
		return 0, fmt.Errorf("want a dimension at byte %d", p.i)
	}
	// Python 2 pickles wrote long integers as 3L.
	digits := p.s[start:p.i]
	if p.i < len(p.s) && p.s[p.i] == 'L' {
		p.i++
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v > MaxElements {
		return 0, fmt.Errorf("dimension %s is too large", clip(digits))
	}
	return int(v), nil
}

func newBufWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 64<<10) }
