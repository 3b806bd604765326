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
	"sort"
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
