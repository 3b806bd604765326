// Package hostile makes the hostile inputs that zoo's tests feed its readers: files that are
// small on disk and large, deep or slow once read (a .npz zip bomb, texts with one huge line
// or CRLF endings, deeply nested tokenizer.json parts, a registry whose aliases fan out). Each
// is built in memory in a fraction of a second, whatever size it claims.
package hostile

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
	"strconv"
	"strings"
)

// npyHeader is the .npy v1.0 header of a little-endian float32 vector of n elements.
func npyHeader(n int) []byte {
	dict := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", n)
	pad := 63 - (10+len(dict))%64
	h := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(h[8:], uint16(len(dict)+pad+1))
	h = append(h, dict...)
	for range pad {
		h = append(h, ' ')
	}
	return append(h, '\n')
}

// ZeroNPZ returns a deflated .npz with one member per name holding that many float32 zeros (a
// multiple of 2^18, whole MiB): a zip bomb, about 1 KiB per MiB. The deflate stream of one MiB
// of zeros that follows zeros starts and ends on a byte boundary, so it is written once and
// copied, and a 2 GiB member takes milliseconds to make.
func ZeroNPZ(members map[string]int) ([]byte, error) {
	const mib = 1 << 20
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	zeros := make([]byte, mib)
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := members[name]
		if n <= 0 || 4*n%mib != 0 {
			return nil, fmt.Errorf("hostile: %d float32 is not a whole number of MiB", n)
		}
		hdr := npyHeader(n)
		var data bytes.Buffer
		fw, _ := flate.NewWriter(&data, flate.BestCompression)
		fw.Write(hdr)
		fw.Write(zeros)
		fw.Flush()
		first := data.Len()
		crc := crc32.Update(crc32.ChecksumIEEE(hdr), crc32.IEEETable, zeros)
		if mibs := 4 * n / mib; mibs > 1 {
			fw.Write(zeros)
			fw.Flush()
			seg := bytes.Clone(data.Bytes()[first:]) // one MiB of zeros after zeros
			crc = crc32.Update(crc, crc32.IEEETable, zeros)
			for i := 3; i <= mibs; i++ {
				data.Write(seg)
				crc = crc32.Update(crc, crc32.IEEETable, zeros)
			}
		}
		var tail bytes.Buffer
		tw, _ := flate.NewWriter(&tail, flate.BestCompression)
		tw.Close() // a final empty block
		data.Write(tail.Bytes())
		f, err := w.CreateRaw(&zip.FileHeader{Name: name + ".npy", Method: zip.Deflate, CRC32: crc,
			CompressedSize64: uint64(data.Len()), UncompressedSize64: uint64(len(hdr) + 4*n)})
		if err != nil {
			return nil, err
		}
		f.Write(data.Bytes())
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// NestedTokenizerJSON returns a WordPiece tokenizer.json whose part ("normalizer",
// "pre_tokenizer" or "post_processor") is a Sequence nested depth deep around one leaf
// (Lowercase, Whitespace, or BertProcessing).
func NestedTokenizerJSON(part string, depth int) []byte {
	var key, leaf string
	switch part {
	case "normalizer":
		key, leaf = "normalizers", `{"type":"Lowercase"}`
	case "pre_tokenizer":
		key, leaf = "pretokenizers", `{"type":"Whitespace"}`
	default:
		part, key, leaf = "post_processor", "processors", `{"type":"BertProcessing","sep":["[SEP]",3],"cls":["[CLS]",2]}`
	}
	var b bytes.Buffer
	b.WriteString(`{"model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"[UNK]":0,"a":1,"[CLS]":2,"[SEP]":3}},"` + part + `":`)
	for range depth {
		b.WriteString(`{"type":"Sequence","` + key + `":[`)
	}
	b.WriteString(leaf)
	for range depth {
		b.WriteString(`]}`)
	}
	b.WriteString("}")
	return b.Bytes()
}

// words is the vocabulary of the texts below.
var words = []string{"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "attention", "encoder", "window", "token"}

// Text returns n bytes of words separated by spaces, in lines of twelve words ended by eol
// ("\n", "\r\n"; "" for a single line, the words then separated by spaces throughout).
func Text(n int, eol string) []byte {
	b := make([]byte, 0, n+32)
	x := uint32(1)
	for k := 0; len(b) < n; k++ {
		x = x*1664525 + 1013904223
		b = append(b, words[(x>>16)%uint32(len(words))]...)
		switch {
		case eol != "" && k%12 == 11:
			b = append(b, '.')
			b = append(b, eol...)
		default:
			b = append(b, ' ')
		}
	}
	return b[:n]
}

// PeakRSS returns this process's peak resident memory in bytes (VmHWM in /proc/self/status),
// for a child process of a test to report: unlike a child's rusage seen by its parent, it
// does not count the parent's memory at the fork (Linux keeps the larger of the two across
// exec). It returns an error where /proc is missing.
func PeakRSS() (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// AliasFanout returns a registry.yaml with one preset of k keys anchored once and referenced
// by k presets: about 30k bytes that expand to k² values.
func AliasFanout(k int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: zoo/v1\nvariants:\n  - name: fan\n    plugin: builtin\n    presets:\n      p0: &p\n")
	for i := range k {
		fmt.Fprintf(&b, "        k%d: %d\n", i, i)
	}
	for i := 1; i <= k; i++ {
		fmt.Fprintf(&b, "      p%d: *p\n", i)
	}
	return b.Bytes()
}
