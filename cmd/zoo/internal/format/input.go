package format

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ParseCounts parses a comma-separated list of positive integers ("1,8") given to the flag
// --name; the error names the flag and quotes the value.
func ParseCounts(name, s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--%s %q: want positive integers separated by commas", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// ReadHead returns the first n bytes of the file at path (fewer when the file is shorter);
// an empty file or a directory is an error naming it.
func ReadHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := io.ReadFull(f, buf)
	if k == 0 {
		if err == io.EOF {
			return nil, fmt.Errorf("input %s is empty (0 bytes): nothing to encode", path)
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("input %s: %w", path, err)
		}
	}
	return buf[:k], nil
}
