package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCompleteCandidates runs the hidden __complete command in process.
func TestCompleteCandidates(t *testing.T) {
	cases := []struct {
		words []string
		want  []string
		not   []string
	}{
		{[]string{""}, []string{"list", "run", "export", "completion", "man"}, []string{"__complete", "__serve-variant"}},
		{[]string{"ru"}, []string{"run"}, []string{"list"}},
		{[]string{"-"}, []string{"--registry", "--json", "--version"}, nil},
		{[]string{"run", "--in"}, []string{"--input"}, []string{"--onnx"}},
		{[]string{"run", "van"}, []string{"vanilla", "vanilla.tiny"}, []string{"linformer"}},
		{[]string{"run", "vanilla", "--input", "x.txt", ""}, nil, []string{"vanilla"}},
		{[]string{"bench", "vanilla", "lin"}, []string{"linformer", "linformer.tiny"}, nil},
		{[]string{"run", "--backend", ""}, []string{"cpu", "auto"}, nil},
		{[]string{"run", "--precision", ""}, []string{"fp32", "bf16", "int8", "int8-attention"}, nil},
		{[]string{"export", "vanilla", "--onnx", "--precision", ""}, []string{"fp32", "int8"}, []string{"bf16", "int8-attention"}},
		{[]string{"run", "--input", ""}, nil, []string{"vanilla"}},
		{[]string{"--registry", "r.yaml", "l"}, []string{"list"}, nil},
		{[]string{"plugin", ""}, []string{"new", "test"}, nil},
		{[]string{"plugin", "test", "--j"}, []string{"--json"}, nil},
		{[]string{"help", "e"}, []string{"export", "environment"}, nil},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}, nil},
		{[]string{"nosuchverb", ""}, nil, []string{"list"}},
	}
	for _, c := range cases {
		code, out, errs := zoo(t, append([]string{completeCommand}, c.words...)...)
		got := strings.Fields(out)
		if code != 0 || errs != "" {
			t.Errorf("%q: exit %d, stderr %q", c.words, code, errs)
		}
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: candidates %q lack %q", c.words, got, w)
			}
		}
		for _, w := range c.not {
			if slices.Contains(got, w) {
				t.Errorf("%q: candidates %q include %q", c.words, got, w)
			}
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errs := zoo(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "__complete") {
			t.Errorf("%s: exit %d, stderr %q\n%s", sh, code, errs, out)
			continue
		}
		path, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s is not installed: its script is not parsed", sh)
			continue
		}
		cmd := exec.Command(path, "-n")
		cmd.Stdin = strings.NewReader(out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s -n rejects the script: %v\n%s", sh, err, msg)
		}
	}
	if code, _, errs := zoo(t, "completion", "tcsh"); code != 2 || !strings.Contains(errs, "bash, fish, zsh") {
		t.Errorf("unknown shell: exit %d, stderr %q", code, errs)
	}
}

// TestBashCompletes loads the bash script in a real bash and completes through a real zoo
// process (this test binary, which runs the CLI when ZOO_BENCH_TEST_CLI=1).
func TestBashCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	_, script, _ := zoo(t, "completion", "bash")
	path := filepath.Join(t.TempDir(), "zoo.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"ru"}, "run"},
		{[]string{"run", "--inp"}, "--input"},
		{[]string{"show", "linformer.t"}, "linformer.tiny"},
		{[]string{"plugin", "te"}, "test"},
		{[]string{"help", "env"}, "environment"},
	}
	for _, c := range cases {
		prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _zoo_complete; printf '%s\n' "${COMPREPLY[@]}"; complete -p zoo`
		cmd := exec.Command(bash, append([]string{"-c", prog, "bash", path, exe}, c.words...)...)
		cmd.Env = append(os.Environ(), "ZOO_BENCH_TEST_CLI=1")
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil || len(lines) != 2 || lines[0] != c.want || !strings.Contains(lines[1], "-F _zoo_complete zoo") {
			t.Errorf("completing %q: %v, got %q; want %q and the complete registration", c.words, err, out, c.want)
		}
	}
}

// TestZshAndFishComplete loads the zsh and fish scripts in the real shells (where
// installed) and completes through a real zoo process: a link named zoo to this test binary,
// which runs the CLI when ZOO_BENCH_TEST_CLI=1. zsh's completion builtins are stubbed (they
// need a terminal): compadd prints what it is given, compdef the registration, _files globs.
func TestZshAndFishComplete(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, "zoo")); err != nil {
		t.Skip(err)
	}
	progs := map[string]string{
		"zsh": `compdef() { print "compdef $*" }; compadd() { print -l -- ${(P)2} }; _files() { print -l -- ${words[CURRENT]}*(N) }
source <(zoo completion zsh); words=(zoo "$@"); CURRENT=$#words; _zoo`,
		"fish": `zoo completion fish | source; complete -C "zoo $argv"`,
	}
	cases := []struct {
		words []string
		want  []string
	}{
		{[]string{"ru"}, []string{"run"}},
		{[]string{"run", "--inp"}, []string{"--input"}},
		{[]string{"show", "linformer.t"}, []string{"linformer.tiny"}},
		{[]string{"help", "env"}, []string{"environment"}},
		{[]string{"run", "--input", "zo"}, []string{"zoo"}}, // no candidates from zoo: the shell's files
	}
	for sh, prog := range progs {
		path, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s is not installed: its script is not run", sh)
			continue
		}
		for _, c := range cases {
			args := []string{"-c", prog, sh}
			if sh == "fish" {
				args = []string{"-c", prog, strings.Join(c.words, " ")}
			} else {
				args = append(args, c.words...)
			}
			cmd := exec.Command(path, args...)
			cmd.Env = append(os.Environ(), "ZOO_BENCH_TEST_CLI=1", "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			got := strings.Fields(string(out))
			if sh == "zsh" {
				if len(got) < 3 || strings.Join(got[:3], " ") != "compdef _zoo zoo" {
					t.Errorf("zsh: the script does not register _zoo for zoo: %q", out)
					continue
				}
				got = got[3:]
			}
			if err != nil || strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("%s completing %q: %v, got %q; want %q", sh, c.words, err, out, c.want)
			}
		}
	}
}
