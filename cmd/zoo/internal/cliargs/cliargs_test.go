package cliargs

import (
	"slices"
	"testing"
)

// TestStripBool: the flag is taken out anywhere before "--" (never args[0], never after "--"),
// the last value given wins, and without the flag the default stands.
func TestStripBool(t *testing.T) {
	cases := []struct {
		args []string
		def  bool
		want []string
		on   bool
	}{
		{[]string{"zoo", "list"}, false, []string{"zoo", "list"}, false},
		{[]string{"zoo", "list"}, true, []string{"zoo", "list"}, true},
		{[]string{"zoo", "--pin", "list"}, false, []string{"zoo", "list"}, true},
		{[]string{"zoo", "run", "x", "--pin=true"}, false, []string{"zoo", "run", "x"}, true},
		{[]string{"zoo", "--pin", "run", "--pin=false"}, false, []string{"zoo", "run"}, false},
		{[]string{"zoo", "--pin=false", "run"}, true, []string{"zoo", "run"}, false},
		{[]string{"zoo", "run", "--", "--pin"}, false, []string{"zoo", "run", "--", "--pin"}, false},
		{[]string{"--pin", "run"}, false, []string{"--pin", "run"}, false},
		{[]string{"zoo", "--pinned", "--pin=yes"}, false, []string{"zoo", "--pinned", "--pin=yes"}, false},
	}
	for _, c := range cases {
		got, on := StripBool(c.args, "pin", c.def)
		if !slices.Equal(got, c.want) || on != c.on {
			t.Errorf("StripBool(%q, %v) = %q, %v; want %q, %v", c.args, c.def, got, on, c.want, c.on)
		}
	}
}
