package tensorio

import (
	"archive/zip"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// MaxNPZEntries is the most arrays ReadNPZ accepts in one archive.
const MaxNPZEntries = 4096

// ReadNPZ reads the arrays of a numpy .npz archive (np.savez or np.savez_compressed) of size
// bytes from r, named as numpy names them (the member name without ".npy"), sorted by name.
// Each member is read as ReadNPY reads a file, with its dtypes. maxBytes bounds the sum of
// the members' uncompressed sizes, which are checked before anything is decompressed, so a
// small archive that inflates to more (a zip bomb) is an error, not an allocation. A file that
// is not a zip archive, a member that is not a .npy file, two members with one name, more than
// MaxNPZEntries members, an encrypted member or a malformed array are errors naming the member.
func ReadNPZ(r io.ReaderAt, size, maxBytes int64) ([]Named, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("npz: not a .npz (zip) archive: %w", err)
	}
	if len(zr.File) > MaxNPZEntries {
		return nil, fmt.Errorf("npz: %d members, more than the limit of %d", len(zr.File), MaxNPZEntries)
	}
	var total uint64
	seen := map[string]bool{}
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok || name == "" {
			return nil, fmt.Errorf("npz: member %q is not a .npy array", clip(f.Name))
		}
		if seen[name] {
			return nil, fmt.Errorf("npz: two members are named %q", clip(name))
		}
		seen[name] = true
		if f.Flags&0x1 != 0 {
			return nil, fmt.Errorf("npz: member %q is encrypted", clip(f.Name))
		}
		total += f.UncompressedSize64
		if total > uint64(maxBytes) {
			return nil, fmt.Errorf("npz: members hold more than %d bytes uncompressed (the limit)", maxBytes)
		}
	}
	out := make([]Named, 0, len(zr.File))
	for _, f := range zr.File {
		name := strings.TrimSuffix(f.Name, ".npy")
		t, err := readMember(f)
		if err != nil {
			return nil, fmt.Errorf("npz: member %q: %w", clip(f.Name), err)
		}
		out = append(out, Named{Name: name, Tensor: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// readMember decompresses one member and parses it as .npy. archive/zip fails a member whose
// data runs past its declared size, and reports a bad checksum at the end, which is read here
// (ReadNPY stops at the end of the data it needs).
func readMember(f *zip.File) (*tensor.Tensor, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	t, err := ReadNPY(rc)
	if err != nil {
		return nil, err
	}
	var one [1]byte
	if _, err := rc.Read(one[:]); err != io.EOF {
		return nil, fmt.Errorf("reading past the array: %v", err)
	}
	return t, nil
}
