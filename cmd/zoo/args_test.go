package main

import (
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/cliargs"
)

// TestUnknownFlag: a misspelt flag gets the closest flag of the command that refused it, as a
// misspelt command does, on either side of the name and before the command; exit 2, one line.
func TestUnknownFlag(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "vanilla.tiny", "--inptu", "x"}, "zoo: run: unknown flag --inptu; did you mean --input?\n"},
		{[]string{"run", "--inptu", "x", "vanilla.tiny"}, "zoo: run: unknown flag --inptu; did you mean --input?\n"},
		{[]string{"run", "vanilla.tiny", "--inptu=x"}, "zoo: run: unknown flag --inptu; did you mean --input?\n"},
		{[]string{"bench", "vanilla.tiny", "--rep", "2"}, "zoo: bench: unknown flag --rep; did you mean --reps?\n"},
		{[]string{"plugin", "new", "--dri", "d", "x"}, "zoo: plugin new: unknown flag --dri; did you mean --dir?\n"},
		{[]string{"run", "vanilla.tiny", "--frobnicate"}, "zoo: run: unknown flag --frobnicate (see zoo help run)\n"},
		{[]string{"list", "-q"}, "zoo: list: unknown flag -q (see zoo help list)\n"},
		// Global flags, before the command.
		{[]string{"--regstry", "r.yaml", "list"}, "zoo: unknown flag --regstry; did you mean --registry?\n"},
		{[]string{"--jsn", "backends"}, "zoo: unknown flag --jsn; did you mean --json?\n"},
		{[]string{"--frobnicate", "list"}, "zoo: unknown flag --frobnicate (see zoo help)\n"},
	}
	for _, c := range cases {
		code, out, errs := zoo(t, c.args...)
		if code != 2 || errs != c.want || out != "" {
			t.Errorf("zoo %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, out, errs, c.want)
		}
	}
}

// TestRequiredFlag: a missing required flag is named as users type it, with the command and
// where its help is; exit 2, one line on stderr.
func TestRequiredFlag(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "vanilla.tiny"}, "zoo: run: --input is required (see zoo help run)\n"},
		{[]string{"--threads", "2", "run", "vanilla.tiny"}, "zoo: run: --input is required (see zoo help run)\n"},
		{[]string{"eval", "vanilla.tiny", "--json"}, "zoo: eval: --input is required (see zoo help eval)\n"},
		{[]string{"approx", "vanilla.tiny"}, "zoo: approx: --weights and --input are required (see zoo help approx)\n"},
	}
	for _, c := range cases {
		code, _, errs := zoo(t, c.args...)
		if code != 2 || errs != c.want {
			t.Errorf("zoo %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, errs, c.want)
		}
	}
	if got := cliargs.AndList([]string{"--a", "--b", "--c"}); got != "--a, --b and --c" {
		t.Errorf("andList = %q", got)
	}
}
