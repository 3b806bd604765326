package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/cliargs"
)

// oneLineErr fails unless stderr is exactly one line.
func oneLineErr(t *testing.T, what, stderr string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "zoo: ") {
		t.Errorf("%s: stderr is not one zoo: line: %q", what, stderr)
	}
}

func TestHelp(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"help"}, []string{"COMMANDS:", "list", "completion", "GLOBAL OPTIONS:", "--registry", "zoo help environment"}},
		{[]string{"--help"}, []string{"COMMANDS:", "Examples:"}},
		{[]string{"help", "run"}, []string{"zoo run - encode", "--input", "Examples:", "zoo run linformer --input text.txt"}},
		{[]string{"help", "plugin", "new"}, []string{"zoo plugin new", "--zoo-src", "Examples:"}},
		{[]string{"help", "environment"}, []string{"ZOO_CPU=auto|avx512|avx2|generic", "ZOO_THREADS=N", "Default: 20s", "Tests and benchmarks only"}},
		{[]string{"help", "help"}, []string{"zoo help environment", "zoo help registry"}},
		{[]string{"help", "registry"}, []string{"A registry is code", "a relative path is resolved", "sha256:", "[unpinned]", "--require-pinned", "ZOO_REQUIRE_PINNED=1", "setsid"}},
	}
	for _, c := range cases {
		code, out, errs := zoo(t, c.args...)
		if code != 0 || errs != "" {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	// zoo help VERB is zoo VERB --help.
	_, a, _ := zoo(t, "help", "bench")
	_, b, _ := zoo(t, "bench", "--help")
	if a != b {
		t.Errorf("zoo help bench and zoo bench --help differ:\n%s\n---\n%s", a, b)
	}
}

func TestUnknownCommand(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lsit"}, `unknown command "lsit" (did you mean "list"?)`},
		{[]string{"expotr", "vanilla"}, `(did you mean "export"?)`},
		{[]string{"plugin", "nwe", "x"}, `unknown command "nwe" (did you mean "new"?)`},
		{[]string{"help", "lsit"}, `unknown help topic "lsit" (did you mean "list"?)`},
		{[]string{"help", "enviroment"}, `(did you mean "environment"?)`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"; see`},
	}
	for _, c := range cases {
		code, out, errs := zoo(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and %q", c.args, code, errs, out, c.want)
		}
		oneLineErr(t, strings.Join(c.args, " "), errs)
	}
}

// TestExamples checks that every verb's help shows two or three examples, and that each
// example names commands and flags that exist.
func TestExamples(t *testing.T) {
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	var walk func(cmds []*cli.Command, path string)
	walk = func(cmds []*cli.Command, path string) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			name := path + " " + c.Name
			before, ex, ok := strings.Cut(c.Description, "Examples:\n")
			ok = ok && (before == "" || strings.HasSuffix(before, "\n\n"))
			lines := strings.Split(ex, "\n")
			if !ok || len(lines) < 2 || len(lines) > 3 {
				t.Errorf("%s: %d examples, want 2 or 3 at the end of its Description", name, len(lines))
			}
			for _, l := range lines {
				checkExample(t, app, name, strings.TrimSpace(l))
			}
			walk(c.Subcommands, name)
		}
	}
	walk(app.Commands, "zoo")
}

func checkExample(t *testing.T, app *cli.App, verb, line string) {
	t.Helper()
	_, rest, ok := strings.Cut(" "+line, " zoo ")
	if !ok {
		_, rest, ok = strings.Cut(line, "(zoo ")
	}
	if !ok {
		t.Errorf("%s: example %q does not run zoo", verb, line)
		return
	}
	words := strings.Fields(rest)
	for i, w := range words {
		if strings.ContainsAny(w, "|>)") {
			words = words[:i]
			break
		}
	}
	if len(words) == 0 {
		t.Errorf("%s: example %q has no command", verb, line)
		return
	}
	cmd := app.Command(words[0])
	if cmd == nil {
		t.Errorf("%s: example %q: no command %q", verb, line, words[0])
		return
	}
	if len(cmd.Subcommands) > 0 && len(words) > 1 {
		if cmd = cmd.Command(words[1]); cmd == nil {
			t.Errorf("%s: example %q: no subcommand %q", verb, line, words[1])
			return
		}
	}
	if !strings.HasPrefix("zoo "+strings.Join(words, " "), verb) {
		t.Errorf("%s: example %q is about another command", verb, line)
	}
	for _, w := range words {
		if name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "="); strings.HasPrefix(w, "-") && !cliargs.DefinesFlag(cmd, name) {
			t.Errorf("%s: example %q: the command has no flag %s", verb, line, w)
		}
	}
}

func TestEnvironmentChecked(t *testing.T) {
	cases := []struct {
		name, value string
		code        int
		want        string
	}{
		{"ZOO_CPU", "sse2", 2, `zoo: ZOO_CPU="sse2": want one of auto, avx512, avx2, generic; see ` + "`zoo help environment`"},
		{"ZOO_THREADS", "abc", 2, `zoo: ZOO_THREADS="abc": want a positive integer`},
		{"ZOO_PLUGIN_START_TIMEOUT", "soon", 2, `ZOO_PLUGIN_START_TIMEOUT="soon": want a positive duration`},
		{"ZOO_VERBOSE", "yes", 2, `ZOO_VERBOSE="yes": want 1 or 0`},
		{"ZOO_THRADS", "2", 0, `zoo: warning: unknown environment variable ZOO_THRADS ignored (did you mean "ZOO_THREADS"?)`},
	}
	for _, c := range cases {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			for _, args := range [][]string{{"list"}, {"backends", "--json"}} {
				code, _, errs := zoo(t, args...)
				if code != c.code || !strings.Contains(errs, c.want) {
					t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", args, code, errs, c.code, c.want)
				}
				oneLineErr(t, c.name, errs)
			}
		})
	}
}

func TestZooCPULevel(t *testing.T) {
	levels := cpu.Levels()
	for _, l := range levels {
		t.Setenv("ZOO_CPU", l)
		code, out, errs := zoo(t, "backends", "--json")
		if code != 0 || !strings.Contains(out, `"kernel_level": "`+l+`"`) {
			t.Errorf("ZOO_CPU=%s: exit %d, stderr %q, out %s", l, code, errs, out)
		}
	}
	for _, l := range []string{"avx512", "avx2"} {
		if slices.Contains(levels, l) {
			continue
		}
		t.Setenv("ZOO_CPU", l)
		code, _, errs := zoo(t, "list")
		if code != 2 || !strings.Contains(errs, "which this CPU (or this build) lacks") {
			t.Errorf("ZOO_CPU=%s on a CPU without it: exit %d, stderr %q", l, code, errs)
		}
	}
	t.Setenv("ZOO_CPU", "")
	if _, out, _ := zoo(t, "backends", "--json"); !strings.Contains(out, `"kernel_level": "`+levels[0]+`"`) {
		t.Errorf("without ZOO_CPU the level is not the best one again:\n%s", out)
	}
}

func TestCommonFlagsBeforeVerb(t *testing.T) {
	// The verb sees --registry wherever it stands: a missing file is its error either way.
	reg := filepath.Join(t.TempDir(), "missing.yaml")
	code, out, errs := zoo(t, "--registry", reg, "list")
	code2, out2, errs2 := zoo(t, "list", "--registry", reg)
	if code != 2 || code2 != 2 || errs != errs2 || out != out2 || !strings.Contains(errs, reg) {
		t.Errorf("--registry before list: exit %d, stderr %q; after: exit %d, stderr %q", code, errs, code2, errs2)
	}
	_, before, _ := zoo(t, "--json", "list")
	_, after, _ := zoo(t, "list", "--json")
	if before != after || !strings.HasPrefix(before, "[") {
		t.Errorf("--json before list prints %q, after %q", before, after)
	}
	for _, args := range [][]string{{"--json", "--backend", "cpu", "backends"}, {"--backend=cpu", "--json", "backends"}, {"--verbose", "--json", "backends"}} {
		code, out, errs := zoo(t, args...)
		if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "[") && !strings.HasPrefix(strings.TrimSpace(out), "{") {
			t.Errorf("%v: exit %d, stderr %q, want JSON:\n%s", args, code, errs, out)
		}
	}
	code, out, errs = zoo(t, "--threads", "2", "run", "vanilla.tiny", "--input", text, "--json")
	if code != 0 || !strings.Contains(out, `"threads": 2`) && !strings.Contains(out, `"tokens": 592`) {
		t.Errorf("--threads before run: exit %d, stderr %q\n%s", code, errs, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--threads", "2", "list"}, "flag --threads does not apply to `zoo list` (its flags: --registry, --json)"},
		{[]string{"--json", "plugin", "new", "x"}, "flag --json does not apply to `zoo plugin new`"},
		{[]string{"--registry"}, "flag --registry needs a value"},
	} {
		code, _, errs := zoo(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errs, c.want)
		}
	}
}

func TestMan(t *testing.T) {
	code, out, errs := zoo(t, "man")
	if code != 0 || !strings.HasPrefix(out, ".nh\n.TH zoo 1") {
		t.Fatalf("exit %d, stderr %q, page starts %q", code, errs, out[:min(len(out), 40)])
	}
	for _, w := range []string{".SH NAME", ".SH ENVIRONMENT", "ZOO_CPU=auto|avx512|avx2|generic", ".SH GLOBAL OPTIONS", ".SH COMMANDS", "zoo run linformer --input text.txt"} {
		if !strings.Contains(out, w) {
			t.Errorf("man page lacks %q", w)
		}
	}
	for _, c := range commands() {
		if !c.Hidden && !strings.Contains(out, ".SH "+c.Name+"\n") {
			t.Errorf("man page lacks a section for %s", c.Name)
		}
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed: the page is not rendered")
	}
	cmd := exec.Command("groff", "-k", "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = strings.NewReader(out)
	if msg, err := cmd.CombinedOutput(); err != nil || len(msg) > 0 {
		t.Errorf("groff: %v\n%s", err, msg)
	}
}

func TestVersion(t *testing.T) {
	code, out, errs := zoo(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "zoo version "+version+", go") || strings.Contains(out, "version dev") {
		t.Errorf("exit %d, stderr %q, out %q", code, errs, out)
	}
	cases := []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T18:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"v0.3.0 rev 0123456789ab 2026-12-01T18:00:00Z"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel) rev abc, dirty"},
		{debug.BuildInfo{}, "(devel) (no VCS revision recorded: built outside a checkout or with -buildvcs=false)"},
		{debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}}, "v1.0.0"},
	}
	for _, c := range cases {
		if got := describeBuild(&c.bi); got != c.want {
			t.Errorf("describeBuild(%+v) = %q, want %q", c.bi, got, c.want)
		}
	}
}

// TestVersionOfBuiltBinary builds zoo and checks that --version reports what `go version -m`
// finds in the same binary: its module version and, where recorded, the VCS revision.
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds zoo")
	}
	bin := filepath.Join(t.TempDir(), "zoo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	mod, want := "", "(no VCS revision recorded"
	for _, l := range strings.Split(string(info), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "mod" {
			mod = f[2] // (devel), or the pseudo-version Go stamps from the VCS
		}
		if len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
			want = "rev " + strings.TrimPrefix(f[1], "vcs.revision=")[:12]
		}
	}
	if mod == "" || !strings.HasPrefix(string(out), "zoo version "+mod+" ") || !strings.Contains(string(out), want) {
		t.Errorf("--version says %q; go version -m says:\n%s", out, info)
	}
}

// TestEnvironmentRealProcess runs zoo in a fresh process (this test binary, which runs the CLI
// when ZOO_BENCH_TEST_CLI=1) with a bad ZOO_CPU and a misspelt variable.
func TestEnvironmentRealProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		env  []string
		code int
		want string
	}{
		{[]string{"ZOO_CPU=sse2"}, 2, "zoo: ZOO_CPU=\"sse2\": want one of auto, avx512, avx2, generic; see `zoo help environment`\n"},
		{[]string{"ZOO_THREADS=abc"}, 2, "zoo: ZOO_THREADS=\"abc\": want a positive integer; see `zoo help environment`\n"},
		{[]string{"ZOO_BAKCEND=cpu"}, 0, "zoo: warning: unknown environment variable ZOO_BAKCEND ignored (did you mean \"ZOO_BACKEND\"?); see `zoo help environment`\n"},
	} {
		cmd := exec.Command(exe, "list")
		cmd.Env = append(append(os.Environ(), "ZOO_BENCH_TEST_CLI=1"), c.env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || stderr.String() != c.want || (code == 0) != (stdout.Len() > 0) {
			t.Errorf("%v zoo list: exit %d, stderr %q, %d bytes on stdout; want exit %d and %q", c.env, code, stderr.String(), stdout.Len(), c.code, c.want)
		}
	}
}

// TestHelpFlagLines renders `zoo help VERB` (and `zoo help VERB SUB`) for every command and
// checks each flag line: its value placeholder is an upper-case word (FILE, NAME, N,N,...,
// KEY=VALUE, FILE.png; urfave/cli's own "value" where the usage names none), not text that
// a backtick pair in the usage meant as a quote (`zoo backends`); and it states its default
// at most once (a usage that says the default and a flag value printed again after it).
func TestHelpFlagLines(t *testing.T) {
	placeholder := regexp.MustCompile(`^(value|[A-Z][A-Z0-9_]*([=,.:\[\]]+[A-Z0-9_]*)*(\.[a-z]+)?)$`)
	var walk func(cmds []*cli.Command, path []string)
	checked := 0
	walk = func(cmds []*cli.Command, path []string) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			args := append(append([]string{"help"}, path...), c.Name)
			code, out, errs := zoo(t, args...)
			if code != 0 {
				t.Errorf("zoo %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
				continue
			}
			checkFlagLines(t, strings.Join(args[1:], " "), out, placeholder)
			checked++
			walk(c.Subcommands, append(path, c.Name))
		}
	}
	walk(commands(), nil)
	_, out, _ := zoo(t, "--help")
	checkFlagLines(t, "zoo", out, placeholder)
	if checked < len(commands()) {
		t.Errorf("checked the help of %d commands, want at least %d", checked, len(commands()))
	}
	// The man page prints each flag's usage and default its own way (\fB--name\fP="": usage (default: X)).
	_, page, _ := zoo(t, "man")
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, `\fB-`) && strings.Count(strings.ToLower(line), "default:") > 1 {
			t.Errorf("zoo man: flag line states its default twice:\n%s", line)
		}
	}
}

// checkFlagLines checks the OPTIONS lines of one help text (see TestHelpFlagLines).
func checkFlagLines(t *testing.T, what, help string, placeholder *regexp.Regexp) {
	t.Helper()
	inOptions := false
	for _, line := range strings.Split(help, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasSuffix(line, "OPTIONS:"):
			inOptions = true
			continue
		case trimmed == "" || !strings.HasPrefix(line, " "):
			inOptions = false
		}
		if !inOptions || !strings.HasPrefix(trimmed, "-") {
			continue
		}
		// "--name PH, -n PH [ --name PH ]   usage": the names end at the first run of two spaces.
		names, usage, _ := strings.Cut(trimmed, "  ")
		names, _, _ = strings.Cut(names, " [ ")
		for _, name := range strings.Split(names, ", ") {
			if _, ph, ok := strings.Cut(name, " "); ok && !placeholder.MatchString(ph) {
				t.Errorf("zoo help %s: flag %q: placeholder %q is not an upper-case word (a backtick pair in its usage?)\n%s", what, name, ph, line)
			}
		}
		if n := strings.Count(strings.ToLower(usage), "default:"); n > 1 {
			t.Errorf("zoo help %s: flag line states its default %d times:\n%s", what, n, line)
		}
	}
}
