// Package runout writes zoo run's outputs to .json, .npy and .safetensors files: streamed
// batch by batch through spill files next to the output, so memory holds one batch, and
// written atomically at the end.
package runout

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	zooroot "github.com/zoo-dev/zoo"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Meta is what an output file records besides the arrays.
type Meta struct {
	Model, Backend string
	// Tokenizer is the tokenizer's entry (nil: the byte tokenizer's).
	Tokenizer map[string]any
	// Seq tells, per output, whether its axis 1 is the sequence (one value per token); an
	// output absent from it is decided from its first batch.
	Seq map[string]bool
}

// New picks the writer from the file extension; a .npy file holds the output selected (which
// the caller has checked the model has; Select may set it later). An unknown extension is an
// error naming it.
func New(path, selected string) (*Stream, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json", ".safetensors":
		return &Stream{format: ext, dir: filepath.Dir(path), base: filepath.Base(path)}, nil
	case ".npy":
		return &Stream{format: ext, only: selected, dir: filepath.Dir(path), base: filepath.Base(path)}, nil
	default:
		return nil, fmt.Errorf("output %s: unknown format %q; use .json, .npy or .safetensors", path, ext)
	}
}

// Stream writes each array of the output (tokens, lengths, offsets, every output) to its own
// spill file next to the output (same file system, so no tmpfs fills up) as the batches come, in the form the format stores it
// (little-endian binary, or JSON text), so memory holds one batch at a time; finish then
// writes the header and copies the spill files into the output through
// tensorio.AtomicWriteFile, and the spill files are removed whatever happens.
type Stream struct {
	format, only string
	dir, base    string
	model        string
	backend      string
	n, next      int
	tokenizer    map[string]any
	arrays       map[string]*spill
	seq          map[string]bool  // output name → axis 1 is the sequence (one value per token)
	rest         map[string][]int // output name → its dims after (windows) or (windows, n)
	buf          []byte
}

// spill is one array's data on its way to the output.
type spill struct {
	f        *os.File
	w        *bufio.Writer
	count    int64 // values written, for JSON's commas
	unlinked bool  // the file has no name any more
}

// Select makes a .npy file hold the output name.
func (s *Stream) Select(name string) { s.only = name }

// Begin starts the file: windows are laid out at n tokens.
func (s *Stream) Begin(meta Meta, n int) error {
	s.model, s.backend = meta.Model, meta.Backend
	s.n = n
	s.tokenizer = meta.Tokenizer
	if s.tokenizer == nil {
		s.tokenizer = (&zooroot.Tokenizer{Tokenizer: tokenize.Bytes{}}).Doc()
	}
	s.arrays, s.rest, s.seq = map[string]*spill{}, map[string][]int{}, map[string]bool{}
	for name, seq := range meta.Seq {
		s.seq[name] = seq
	}
	if s.format == ".npy" {
		return nil
	}
	for _, name := range []string{"tokens", "lengths", "offsets"} {
		if err := s.open(name); err != nil {
			return err
		}
	}
	return nil
}

func (s *Stream) open(name string) error {
	f, err := os.CreateTemp(s.dir, "."+s.base+".part-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(s.dir, s.base), err)
	}
	// Unlinked at once where the system allows (the open file lives on): a process killed
	// mid-run, even by SIGKILL, leaves nothing behind.
	s.arrays[name] = &spill{f: f, w: bufio.NewWriterSize(f, 1<<20), unlinked: os.Remove(f.Name()) == nil}
	return nil
}

// Close removes what an unfinished stream left on disk; it is safe after Finish.
func (s *Stream) Close() {
	for _, sp := range s.arrays {
		sp.f.Close()
		if !sp.unlinked {
			os.Remove(sp.f.Name())
		}
	}
	s.arrays = nil
}

// Add appends a batch of windows and its outputs.
func (s *Stream) Add(b *tokenize.Batch, outs map[string]*tensor.Tensor) error {
	names := make([]string, 0, len(outs))
	for name := range outs {
		if s.only == "" || name == s.only {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if b.N > s.n {
		return fmt.Errorf("a window of %d tokens is longer than the %d the output was laid out for", b.N, s.n)
	}
	for _, name := range names {
		t := outs[name]
		if t.DType != tensor.Float32 || len(t.Shape) < 1 || t.Shape[0] != b.B {
			return fmt.Errorf("output %s is %s %v; zoo writes float32 outputs with one row per window (%d)", name, t.DType, t.Shape, b.B)
		}
		rest, ok := s.rest[name]
		if !ok {
			if s.next > 0 {
				return fmt.Errorf("output %s appeared after the first batch", name)
			}
			seq, known := s.seq[name]
			if !known {
				seq = len(t.Shape) >= 2 && t.Shape[1] == b.N
			}
			if seq && (len(t.Shape) < 2 || t.Shape[1] != b.N) {
				return fmt.Errorf("output %s has shape %v, want (%d, %d, ...): one value per token", name, t.Shape, b.B, b.N)
			}
			s.seq[name] = seq
			rest = append([]int(nil), t.Shape[1:]...)
			if seq {
				rest = rest[1:]
			}
			if err := s.open(name); err != nil {
				return err
			}
			s.rest[name] = rest
		}
		seq := s.seq[name]
		want := append([]int{b.B}, rest...)
		if seq {
			want = append([]int{b.B, b.N}, rest...)
		}
		if !slices.Equal(t.Shape, want) {
			return fmt.Errorf("output %s changed shape: %v, the first batch gave %v", name, t.Shape, want)
		}
		sp := s.arrays[name]
		per := tensor.NumElements(rest)
		for i := 0; i < b.B; i++ {
			if !seq {
				s.floats(sp, t.F32[i*per:(i+1)*per])
				continue
			}
			l := b.Lengths[i]
			s.floats(sp, t.F32[i*b.N*per:(i*b.N+l)*per])
			s.zeros(sp, int64(s.n-l)*int64(per), false)
		}
	}
	if len(s.rest) != len(names) {
		return fmt.Errorf("batch %d has outputs %v, the first had %d", s.next, names, len(s.rest))
	}
	if s.format != ".npy" {
		for i := 0; i < b.B; i++ {
			s.ints(s.arrays["tokens"], b.Row(i))
			s.zeros(s.arrays["tokens"], int64(s.n-b.Lengths[i]), true)
			s.ints(s.arrays["lengths"], []int64{int64(b.Lengths[i])})
			s.ints(s.arrays["offsets"], []int64{b.Offsets[i]})
		}
	}
	s.next += b.B
	return nil
}

// floats appends float32 values: little-endian, or JSON text in the shortest form that
// reads back to the same float32.
func (s *Stream) floats(sp *spill, v []float32) {
	if s.format == ".json" {
		for _, x := range v {
			s.comma(sp)
			s.buf = format.AppendFloat32(s.buf[:0], x)
			sp.w.Write(s.buf)
		}
		return
	}
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		sp.w.Write(b[:])
	}
}

// ints appends int64 values: little-endian, or JSON text.
func (s *Stream) ints(sp *spill, v []int64) {
	if s.format == ".json" {
		for _, x := range v {
			s.comma(sp)
			sp.w.Write(strconv.AppendInt(s.buf[:0], x, 10))
		}
		return
	}
	var b [8]byte
	for _, x := range v {
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		sp.w.Write(b[:])
	}
}

// zeros appends k zeros (int64 when integer, else float32).
func (s *Stream) zeros(sp *spill, k int64, integer bool) {
	if s.format == ".json" {
		zero := format.AppendFloat32(nil, 0)
		if integer {
			zero = []byte("0")
		}
		for ; k > 0; k-- {
			s.comma(sp)
			sp.w.Write(zero)
		}
		return
	}
	var z [8]byte
	size := 4
	if integer {
		size = 8
	}
	for ; k > 0; k-- {
		sp.w.Write(z[:size])
	}
}

func (s *Stream) comma(sp *spill) {
	if sp.count > 0 {
		sp.w.WriteByte(',')
	}
	sp.count++
}

// Shapes returns each output's shape as written.
func (s *Stream) Shapes() map[string][]int {
	out := map[string][]int{}
	for name, rest := range s.rest {
		if s.seq[name] {
			out[name] = append([]int{s.next, s.n}, rest...)
		} else {
			out[name] = append([]int{s.next}, rest...)
		}
	}
	return out
}

// outputNames returns the outputs written, sorted.
func (s *Stream) outputNames() []string {
	names := make([]string, 0, len(s.rest))
	for name := range s.rest {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Finish writes the file at path atomically and returns the paths written.
func (s *Stream) Finish(path string) ([]string, error) {
	defer s.Close()
	for _, sp := range s.arrays {
		if err := sp.w.Flush(); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	var write func(w io.Writer) error
	switch s.format {
	case ".npy":
		if _, ok := s.rest[s.only]; !ok {
			return nil, fmt.Errorf("the model produced no output %s", s.only)
		}
		write = s.writeNPY
	case ".safetensors":
		write = s.writeSafetensors
	default:
		write = s.writeJSON
	}
	if err := tensorio.AtomicWriteFile(path, write); err != nil {
		return nil, err
	}
	return []string{path}, nil
}

func (s *Stream) copyArray(w io.Writer, name string) error {
	_, err := io.Copy(w, s.arrays[name].f)
	return err
}

func (s *Stream) writeNPY(w io.Writer) error {
	hdr, err := tensorio.NPYHeader(tensor.Float32, s.Shapes()[s.only])
	if err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	return s.copyArray(w, s.only)
}

func (s *Stream) writeSafetensors(w io.Writer) error {
	// Shapes without data: SafetensorsHeader needs no more.
	named := []tensorio.Named{
		{Name: "tokens", Tensor: &tensor.Tensor{DType: tensor.Int64, Shape: []int{s.next, s.n}}},
		{Name: "lengths", Tensor: &tensor.Tensor{DType: tensor.Int64, Shape: []int{s.next}}},
		{Name: "offsets", Tensor: &tensor.Tensor{DType: tensor.Int64, Shape: []int{s.next}}},
	}
	for _, name := range s.outputNames() {
		named = append(named, tensorio.Named{Name: name, Tensor: &tensor.Tensor{DType: tensor.Float32, Shape: s.Shapes()[name]}})
	}
	tokMeta := zooroot.ByteTokenizerDoc // the byte tokenizer's entry, as it always was
	if s.tokenizer["kind"] != "bytes" {
		tokMeta = str(s.tokenizer)
	}
	hdr, layout, err := tensorio.SafetensorsHeader(named, map[string]string{
		"model": s.model, "backend": s.backend, "tokenizer": tokMeta,
	})
	if err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	for _, nt := range layout {
		if err := s.copyArray(w, nt.Name); err != nil {
			return err
		}
	}
	return nil
}

// str is v as compact JSON.
func str(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// writeJSON writes the JSON document; data arrays are flat and row-major, with shapes. The
// keys come in the order encoding/json gives a map (sorted), then tokens and outputs.
func (s *Stream) writeJSON(w io.Writer) error {
	tok := str(s.tokenizer)
	parts := []func() error{
		func() error { _, err := fmt.Fprintf(w, `{"backend":%s,"lengths":[`, str(s.backend)); return err },
		func() error { return s.copyArray(w, "lengths") },
		func() error { _, err := fmt.Fprintf(w, `],"model":%s,"offsets":[`, str(s.model)); return err },
		func() error { return s.copyArray(w, "offsets") },
		func() error {
			_, err := fmt.Fprintf(w, `],"tokenizer":%s,"tokens":{"shape":[%d,%d],"data":[`, tok, s.next, s.n)
			return err
		},
		func() error { return s.copyArray(w, "tokens") },
		func() error { _, err := io.WriteString(w, `]},"outputs":{`); return err },
	}
	for i, name := range s.outputNames() {
		sep := ","
		if i == 0 {
			sep = ""
		}
		parts = append(parts,
			func() error {
				_, err := fmt.Fprintf(w, `%s%q:{"shape":%s,"data":[`, sep, name, str(s.Shapes()[name]))
				return err
			},
			func() error { return s.copyArray(w, name) },
			func() error { _, err := io.WriteString(w, `]}`); return err })
	}
	parts = append(parts, func() error { _, err := io.WriteString(w, "}}\n"); return err })
	for _, p := range parts {
		if err := p(); err != nil {
			return err
		}
	}
	return nil
}
