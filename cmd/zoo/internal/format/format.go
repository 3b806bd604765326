// Package format holds the small formatting helpers every zoo verb shares: human-readable
// counts and sizes for tables, milliseconds for reports, and JSON output (indented
// documents, and float32 values in the shortest form that reads back exactly), and the few
// input helpers several verbs share (comma-separated counts, the head of a text file). A new
// output format of one verb belongs with that verb; a helper two verbs use goes here.
package format

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// HumanCount formats n with a decimal suffix and two decimals: "1.50 k", "12.00 M", "3.21 G",
// "1.00 T"; below 1000 (negative numbers included) it prints n as is.
func HumanCount(n int64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.2f T", float64(n)/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.2f G", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2f k", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// HumanBytes formats a byte count in binary units with two decimals: "512 B", "1.50 KiB",
// "2.00 MiB", "3.25 GiB"; below 1 KiB (negative numbers included) it prints "n B".
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Plural returns n followed by noun, in the plural unless n is 1: Plural(1, "window") is
// "1 window", Plural(3, "batch") "3 batches", Plural(0, "warm-up run") "0 warm-up runs". The
// last word takes the regular English plural (-es after s, x, z, ch and sh; -ies for a y after
// a consonant; else -s), which every count zoo prints needs; nouns with another plural are
// not for this function.
func Plural[N ~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %s", n, plural(noun))
}

func plural(noun string) string {
	switch {
	case noun == "":
		return noun
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "z"),
		strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		return noun + "es"
	case len(noun) > 1 && noun[len(noun)-1] == 'y' && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])):
		return noun[:len(noun)-1] + "ies"
	}
	return noun + "s"
}

// MS returns d in milliseconds with microsecond resolution (reports print it as a float).
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// WriteJSON writes v to w as JSON indented by two spaces, followed by a newline. It returns
// the encoder's error (an unsupported value, or a failed write).
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// AppendFloat32 appends x to buf as JSON: the shortest decimal that parses back to the same
// float32. NaN and the infinities, which JSON cannot hold, become null.
func AppendFloat32(buf []byte, x float32) []byte {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(buf, "null"...)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, 32)
}

// Wrap breaks s into lines of at most width runes at blanks (a longer word stands on its own
// line); runs of blanks become one.
func Wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		l := utf8.RuneCountInString(w)
		if i > 0 {
			if n+1+l > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(w)
		n += l
	}
	return b.String()
}
