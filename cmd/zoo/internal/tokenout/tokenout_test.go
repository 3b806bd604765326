package tokenout

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func TestWrite(t *testing.T) {
	for _, c := range []struct {
		in     string
		asJSON bool
		want   string
	}{
		{"a b", false, "98\t<0x61>\n33\t<0x20>\n99\t<0x62>\n"},
		{"hi", true, "{\"ids\":[105,106],\"tokens\":[\"<0x68>\",\"<0x69>\"]}\n"},
		{"", true, "{\"ids\":[],\"tokens\":[]}\n"},
	} {
		var b bytes.Buffer
		n, err := Write(context.Background(), tokenize.Bytes{}, strings.NewReader(c.in), &b, c.asJSON)
		if err != nil || n != len(c.in) || b.String() != c.want {
			t.Errorf("%q (JSON %v): %d tokens, %v:\n%q\nwant\n%q", c.in, c.asJSON, n, err, b.String(), c.want)
		}
	}
	var we *WriteError
	if _, err := Write(context.Background(), tokenize.Bytes{}, strings.NewReader("x"), failing{}, false); !errors.As(err, &we) {
		t.Errorf("a failed write: %v", err)
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestShowToken(t *testing.T) {
	for tok, want := range map[string]string{"a b": `"a b"`, "\u200b": `"\u200b"`, "▁x": "▁x", "": `""`, "##ing": "##ing"} {
		if got := ShowToken(tok); got != want {
			t.Errorf("ShowToken(%q) = %s, want %s", tok, got, want)
		}
	}
}
