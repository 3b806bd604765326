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
// Each member is read as ReadNPY reads a file, with its dtypes.
//
// budget bounds the memory the arrays take as zoo holds them (HeldBytes: an int8 array takes
// eight times its file size, a float64 one half): every member's header is read and checked
// against its declared uncompressed size and against what is left of the budget before any
// member's data is inflated, so a small archive that inflates to more (a zip bomb) is a
// *BudgetError naming the member, not an allocation; budget ≤ 0 is no budget. The data is
// decoded as it inflates, without a copy of the member's bytes. A file that is not a zip
// archive, a member that is not a .npy file, two members with one name, more than
// MaxNPZEntries members, an encrypted member, a member whose data is not the size its array
// and its zip entry declare, or a malformed array are errors naming the member.
func ReadNPZ(r io.ReaderAt, size, budget int64) ([]Named, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("npz: not a .npz (zip) archive: %w", err)
	}
	if len(zr.File) > MaxNPZEntries {
		return nil, fmt.Errorf("npz: %d members, more than the limit of %d", len(zr.File), MaxNPZEntries)
	}
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
		if f.UncompressedSize64 > 1<<62 {
			return nil, fmt.Errorf("npz: member %q declares %d bytes uncompressed", clip(f.Name), f.UncompressedSize64)
		}
	}
	// First pass: each member's header only (a few hundred bytes inflated), so that the
	// whole archive is checked against the budget before any data is inflated.
	var total int64
	for _, f := range zr.File {
		need, err := memberNeed(f)
		if err != nil {
			return nil, fmt.Errorf("npz: member %q: %w", clip(f.Name), err)
		}
		total += need
		if budget > 0 && total > budget {
			return nil, &BudgetError{Format: "npz", Item: fmt.Sprintf("member %q", clip(f.Name)), Need: need, Total: total, Budget: budget}
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

// memberNeed reads one member's .npy header and returns the bytes its array takes in memory,
// checking that its data is the size the zip entry declares.
func memberNeed(f *zip.File) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	typ, shape, hdrLen, err := readNPYHeader(rc)
	if err != nil {
		return 0, err
	}
	n := tensor.NumElements(shape)
	if size, left := int64(n)*int64(typ.size), int64(f.UncompressedSize64)-hdrLen; left != size {
		return 0, fmt.Errorf("npy: shape %v of %v needs %d data bytes, member has %d", shape, typ, size, left)
	}
	return HeldBytes(typ.dt, n), nil
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
	t, err := readNPY(rc, int64(f.UncompressedSize64), 0)
	if err != nil {
		return nil, err
	}
	var one [1]byte
	if _, err := rc.Read(one[:]); err != io.EOF {
		return nil, fmt.Errorf("reading past the array: %v", err)
	}
	return t, nil
}
