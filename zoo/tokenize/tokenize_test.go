package tokenize

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

func TestEncodeDecode(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	ids := Encode(all)
	for i, id := range ids {
		if id != int64(i)+1 {
			t.Fatalf("Encode byte %d = %d, want %d", i, id, i+1)
		}
	}
	back, err := Decode(ids)
	if err != nil || !bytes.Equal(back, all) {
		t.Fatalf("Decode(Encode(all)) = %v, %v", back, err)
	}
	if got := Encode(nil); got == nil || len(got) != 0 {
		t.Fatalf("Encode(nil) = %#v, want empty non-nil", got)
	}
	// Padding is skipped.
	got, err := Decode([]int64{105, 106, 0, 0})
	if err != nil || string(got) != "hi" {
		t.Fatalf("Decode with padding = %q, %v", got, err)
	}
	for _, bad := range []int64{-1, 257, 1 << 40} {
		_, err := Decode([]int64{1, bad})
		if err == nil || !strings.Contains(err.Error(), "token 1 has id") {
			t.Errorf("Decode(%d) error = %v", bad, err)
		}
	}
}

func TestNewWindowerErrors(t *testing.T) {
	for _, tc := range []struct {
		window, batch int
		want          string
	}{
		{0, 1, "tokenize: window must be at least 1, got 0"},
		{4, 0, "tokenize: batch must be at least 1, got 0"},
		{-3, 2, "tokenize: window must be at least 1, got -3"},
		{1 << 20, 1 << 12, "tokenize: window 1048576 × batch 4096 is more than 2^31 tokens"},
	} {
		_, err := NewWindower(strings.NewReader("x"), tc.window, tc.batch)
		if err == nil || err.Error() != tc.want {
			t.Errorf("NewWindower(%d, %d) error = %v, want %q", tc.window, tc.batch, err, tc.want)
		}
	}
}

func collect(t *testing.T, r io.Reader, window, batch int) ([]*Batch, error) {
	t.Helper()
	w, err := NewWindower(r, window, batch)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Batch
	for {
		b, err := w.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
}

func TestWindowerExact(t *testing.T) {
	const P = PadID
	tests := []struct {
		name          string
		in            string
		window, batch int
		want          []*Batch
	}{
		{
			name: "one short window", in: "ab", window: 4, batch: 2,
			want: []*Batch{{B: 1, N: 2, Tokens: []int64{98, 99}, Mask: []bool{false, false}, Lengths: []int{2}, Offsets: []int64{0}}},
		},
		{
			name: "odd length pads last row", in: "abcde", window: 2, batch: 8,
			want: []*Batch{{B: 3, N: 2,
				Tokens:  []int64{98, 99, 100, 101, 102, P},
				Mask:    []bool{false, false, false, false, false, true},
				Lengths: []int{2, 2, 1}, Offsets: []int64{0, 2, 4}}},
		},
		{
			name: "two batches", in: "abcdefg", window: 3, batch: 2,
			want: []*Batch{
				{B: 2, N: 3, Tokens: []int64{98, 99, 100, 101, 102, 103}, Mask: make([]bool, 6), Lengths: []int{3, 3}, Offsets: []int64{0, 3}},
				{B: 1, N: 1, Tokens: []int64{104}, Mask: []bool{false}, Lengths: []int{1}, Offsets: []int64{6}},
			},
		},
		{
			name: "exact multiple", in: "abcd", window: 2, batch: 1,
			want: []*Batch{
				{B: 1, N: 2, Tokens: []int64{98, 99}, Mask: []bool{false, false}, Lengths: []int{2}, Offsets: []int64{0}},
				{B: 1, N: 2, Tokens: []int64{100, 101}, Mask: []bool{false, false}, Lengths: []int{2}, Offsets: []int64{2}},
			},
		},
		{
			name: "window 1", in: "xyz", window: 1, batch: 2,
			want: []*Batch{
				{B: 2, N: 1, Tokens: []int64{121, 122}, Mask: []bool{false, false}, Lengths: []int{1, 1}, Offsets: []int64{0, 1}},
				{B: 1, N: 1, Tokens: []int64{123}, Mask: []bool{false}, Lengths: []int{1}, Offsets: []int64{2}},
			},
		},
		{
			name: "utf8 straddles windows", in: "é!", window: 1, batch: 3,
			want: []*Batch{
				{B: 3, N: 1, Tokens: []int64{0xc3 + 1, 0xa9 + 1, '!' + 1}, Mask: make([]bool, 3), Lengths: []int{1, 1, 1}, Offsets: []int64{0, 1, 2}},
			},
		},
		{
			name: "zero bytes are not padding", in: "\x00\x00\x00", window: 2, batch: 2,
			want: []*Batch{{B: 2, N: 2, Tokens: []int64{1, 1, 1, P}, Mask: []bool{false, false, false, true}, Lengths: []int{2, 1}, Offsets: []int64{0, 2}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One-byte reads check that short reads from the reader do not shorten windows.
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := collect(t, r, tc.window, tc.batch)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("batches:\n got %+v\nwant %+v", deref(got), deref(tc.want))
				}
			}
		})
	}
}

func deref(bs []*Batch) []Batch {
	out := make([]Batch, len(bs))
	for i, b := range bs {
		out[i] = *b
	}
	return out
}

func TestWindowerEmpty(t *testing.T) {
	w, _ := NewWindower(strings.NewReader(""), 4, 4)
	if _, err := w.Next(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Next on empty input = %v, want ErrEmpty", err)
	}
	if _, err := w.Next(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("second Next on empty input = %v, want ErrEmpty again", err)
	}
}

func TestWindowerReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom))
	w, _ := NewWindower(r, 2, 4)
	_, err := w.Next()
	if !errors.Is(err, boom) || err.Error() != "read input: disk on fire" {
		t.Fatalf("Next = %v, want wrapped read error", err)
	}
	if _, err2 := w.Next(); err2 != err {
		t.Fatalf("error is not sticky: %v", err2)
	}
}

func TestBatchHelpers(t *testing.T) {
	bs, err := collect(t, strings.NewReader("hello"), 3, 4)
	if err != nil || len(bs) != 1 {
		t.Fatal(bs, err)
	}
	b := bs[0]
	if got, _ := Decode(b.Row(1)); string(got) != "lo" {
		t.Errorf("Row(1) = %q", got)
	}
	if b.Row(2) != nil || b.Row(-1) != nil {
		t.Error("Row out of range should be nil")
	}
	tok, mask := b.Tensors()
	if err := tok.Check(); err != nil || tok.Shape[0] != 2 || tok.Shape[1] != 3 {
		t.Errorf("tokens tensor %v %v", tok.Shape, err)
	}
	if err := mask.Check(); err != nil || !mask.Bool[5] || mask.Bool[4] {
		t.Errorf("mask tensor %v %v", mask.Bool, err)
	}
	c := b.Clone()
	c.Tokens[0] = 7
	if b.Tokens[0] == 7 || !reflect.DeepEqual(c.Lengths, b.Lengths) {
		t.Error("Clone is not deep")
	}
}

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct{ left, pos int }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := min(len(b), p.left)
	for i := range b[:n] {
		b[i] = byte((p.pos + i) * 7 % 251)
	}
	p.pos += n
	p.left -= n
	return n, nil
}

func TestWindowerStreams50MB(t *testing.T) {
	const size = 50 << 20
	const window, batch = 512, 16
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	w, err := NewWindower(&patternReader{left: size}, window, batch)
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	total, batches := 0, 0
	var sum int64
	for {
		err := w.NextInto(&b)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < b.B; i++ {
			if want := int64(total); b.Offsets[i] != want {
				t.Fatalf("offset %d, want %d", b.Offsets[i], want)
			}
			total += b.Lengths[i]
		}
		sum += b.Tokens[0]
		batches++
	}
	runtime.ReadMemStats(&after)
	if total != size || w.Offset() != size {
		t.Fatalf("streamed %d bytes (offset %d), want %d", total, w.Offset(), size)
	}
	if want := (size + window*batch - 1) / (window * batch); batches != want {
		t.Fatalf("%d batches, want %d", batches, want)
	}
	// One batch is 512×16 × (8 + 1) bytes + the 8 KiB input buffer ≈ 80 KiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("streaming 50 MB allocated %d bytes in total, want < 1 MiB", alloc)
	}
	_ = sum
}

func TestNextIntoAllocs(t *testing.T) {
	r := &patternReader{left: 1 << 30}
	w, _ := NewWindower(r, 64, 8)
	var b Batch
	if err := w.NextInto(&b); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := w.NextInto(&b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("NextInto allocates %v times per batch, want 0", allocs)
	}
}

func TestNextPeakHeapBounded(t *testing.T) {
	// Next allocates a fresh batch each call; the garbage collector must be able to reclaim
	// them, so the live heap stays small while 50 MB stream through.
	const size = 50 << 20
	w, _ := NewWindower(&patternReader{left: size}, 1024, 8)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	for i := 0; ; i++ {
		_, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	if peak > base+8<<20 {
		t.Fatalf("live heap grew by %d bytes while streaming, want < 8 MiB", peak-base)
	}
}

func FuzzWindower(f *testing.F) {
	f.Add([]byte("hello, world"), 3, 2)
	f.Add([]byte(""), 1, 1)
	f.Add([]byte("héllo wörld ✓"), 1, 5)
	f.Add(bytes.Repeat([]byte{0, 255}, 100), 7, 3)
	f.Fuzz(func(t *testing.T, data []byte, window, batch int) {
		window = 1 + int(uint(window)%64)
		batch = 1 + int(uint(batch)%16)
		w, err := NewWindower(bytes.NewReader(data), window, batch)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		var off int64
		for {
			b, err := w.Next()
			if err == io.EOF {
				break
			}
			if errors.Is(err, ErrEmpty) && len(data) == 0 {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.B < 1 || b.B > batch || b.N < 1 || b.N > window || len(b.Tokens) != b.B*b.N || len(b.Mask) != b.B*b.N {
				t.Fatalf("bad batch shape B=%d N=%d", b.B, b.N)
			}
			longest := 0
			for i := 0; i < b.B; i++ {
				if b.Offsets[i] != off {
					t.Fatalf("row %d offset %d, want %d", i, b.Offsets[i], off)
				}
				longest = max(longest, b.Lengths[i])
				for j := 0; j < b.N; j++ {
					pad := j >= b.Lengths[i]
					if b.Mask[i*b.N+j] != pad || (b.Tokens[i*b.N+j] == PadID) != pad {
						t.Fatalf("row %d col %d: mask/padding mismatch", i, j)
					}
				}
				dec, err := Decode(b.Tokens[i*b.N : (i+1)*b.N])
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, dec...)
				off += int64(b.Lengths[i])
			}
			if longest != b.N {
				t.Fatalf("N=%d but longest window is %d", b.N, longest)
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("round trip: got %q, want %q", got, data)
		}
	})
}
