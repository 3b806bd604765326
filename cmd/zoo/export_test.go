package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/export"
	"github.com/zoo-dev/zoo/onnx"
)

// registryNames returns the variant names `zoo list --json` reports.
func registryNames(t *testing.T) []string {
	t.Helper()
	code, out, errs := zoo(t, "list", "--json")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errs)
	}
	var rows []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	return names
}

// dirNames lists a directory's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// With no name, export writes every variant of the registry, with the preset, --set and
// --seed applied to each, and says what it wrote: a line per file, or JSON.
func TestExportEveryVariant(t *testing.T) {
	names := registryNames(t)
	if len(names) < 2 {
		t.Fatalf("registry lists %v", names)
	}
	dir := t.TempDir()
	code, out, errs := zoo(t, "export", "--onnx", "--preset", "tiny", "--seed", "7", "--set", "layers=1", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var want []string
	for _, n := range names {
		want = append(want, n+".tiny.onnx")
		if !strings.Contains(out, "wrote "+filepath.Join(dir, n+".tiny.onnx")+" (") {
			t.Errorf("stdout does not say it wrote %s.tiny.onnx:\n%s", n, out)
		}
	}
	slices.Sort(want)
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
	if lines := strings.Count(out, "\n"); lines != len(names) {
		t.Errorf("%d lines on stdout, want one per variant (%d):\n%s", lines, len(names), out)
	}
	// Each file is what the one-variant export writes with the same flags.
	one := filepath.Join(t.TempDir(), "l.onnx")
	if code, _, errs := zoo(t, "export", "linformer.tiny", "--onnx", "--seed", "7", "--set", "layers=1", "-o", one); code != 0 {
		t.Fatalf("single export: exit %d: %s", code, errs)
	}
	a, _ := os.ReadFile(one)
	b, _ := os.ReadFile(filepath.Join(dir, "linformer.tiny.onnx"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("linformer.tiny.onnx (%d bytes) differs from the single export with the same flags (%d bytes)", len(b), len(a))
	}
	g, err := onnx.Import(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Meta["config"]; !strings.Contains(got, `"layers":1`) {
		t.Errorf("--set layers=1 not applied: config %s", got)
	}

	// --json, into the current directory by default.
	cwd := t.TempDir()
	t.Chdir(cwd)
	code, out, errs = zoo(t, "export", "--onnx", "--preset", "tiny", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var rep export.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(rep.Written) != len(names) {
		t.Fatalf("JSON lists %d files, want %d", len(rep.Written), len(names))
	}
	for i, f := range rep.Written {
		st, err := os.Stat(filepath.Join(cwd, f.Path))
		if f.Model != names[i]+".tiny" || f.Kind != "onnx" || f.Opset != 17 || f.Nodes < 1 || err != nil || st.Size() != f.Bytes {
			t.Errorf("entry %+v: want %s.tiny, onnx, opset 17, its size (stat: %v)", f, names[i], err)
		}
	}
}

// Bad input to the every-variant export is found before anything is written.
func TestExportEveryVariantBadInput(t *testing.T) {
	dir := t.TempDir()
	protected := filepath.Join(dir, "rope.tiny.onnx")
	if err := os.WriteFile(protected, []byte("keep"), 0o444); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "plain.txt")
	os.WriteFile(file, nil, 0o644)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"preset missing", []string{"export", "--onnx", "--preset", "roformer", "-o", dir}, []string{"vanilla", `"roformer"`}},
		{"set key missing", []string{"export", "--onnx", "--preset", "tiny", "--set", "k=8", "-o", dir}, []string{"vanilla", `"k"`}},
		{"read-only file", []string{"export", "--onnx", "--preset", "tiny", "-o", dir}, []string{"rope.tiny.onnx", "read-only"}},
		{"-o is a file", []string{"export", "--onnx", "-o", file}, []string{"not a directory"}},
		{"-o missing", []string{"export", "--onnx", "-o", filepath.Join(dir, "nope")}, []string{"no such directory"}},
		{"weights without a name", []string{"export", "--weights", filepath.Join(dir, "w.safetensors")}, []string{"name the model"}},
		{"two names", []string{"export", "vanilla", "rope", "--onnx", "-o", dir}, []string{"2 arguments"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := zoo(t, c.args...)
			if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line", code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			if got := dirNames(t, dir); !slices.Equal(got, []string{"plain.txt", "rope.tiny.onnx"}) {
				t.Errorf("directory holds %v: something was written", got)
			}
		})
	}
	if data, _ := os.ReadFile(protected); string(data) != "keep" {
		t.Errorf("the read-only file was replaced: %q", data)
	}
}

// Flags that do not apply are errors (exit 2, one line), and nothing is written.
func TestFlagsThatDoNotApply(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "v.onnx")
	if code, _, errs := zoo(t, "export", "vanilla.tiny", "--onnx", "-o", file); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	out := func(name string) string { return filepath.Join(dir, name) }
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"weights not safetensors", []string{"export", "vanilla.tiny", "--weights", out("w.pt")}, "--weights " + out("w.pt") + ": want a .safetensors file"},
		{"onnx to npy", []string{"export", "vanilla.tiny", "--onnx", "-o", out("x.npy")}, "want a .onnx file"},
		{"onnx to a directory", []string{"export", "vanilla.tiny", "--onnx", "-o", dir}, dir},
		{"-o without --onnx", []string{"export", "vanilla.tiny", "--weights", out("w.safetensors"), "-o", out("x.onnx")}, "add --onnx"},
		{"opset without --onnx", []string{"export", "vanilla.tiny", "--weights", out("w.safetensors"), "--opset", "13"}, "--opset applies"},
		{"export file --preset", []string{"export", file, "--onnx", "--preset", "tiny", "-o", out("y.onnx")}, "--preset does not apply"},
		{"export file --seed", []string{"export", file, "--onnx", "--seed", "3", "-o", out("y.onnx")}, "--seed does not apply"},
		{"show file --set", []string{"show", file, "--set", "heads=2"}, "--set does not apply"},
		{"run file --seed", []string{"run", file, "--input", text, "--seed", "1"}, "--seed does not apply"},
		{"run file --preset", []string{"run", "--preset", "tiny", file, "--input", text}, "--preset does not apply"},
		{"bench only files --set", []string{"bench", file, "--set", "layers=1", "--seq", "16"}, "--set does not apply"},
		{"parity file --set", []string{"parity", file, "--set", "layers=1"}, "--set does not apply"},
		{"parity --window without --input", []string{"parity", "vanilla.tiny", "--window", "32"}, "--window applies with --input"},
		{"run --select without .npy", []string{"run", "vanilla.tiny", "--input", text, "--select", "logits", "--output", out("o.json")}, "--select applies to a .npy"},
		{"run --select without --output", []string{"run", "vanilla.tiny", "--input", text, "--select", "logits"}, "--select applies to a .npy"},
		{"parity text-fed file --seed", []string{"parity", file, "--seed", "2"}, "--seed does not apply"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, errs := zoo(t, c.args...)
			if code != 2 || stdout != "" || strings.Count(errs, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line", code, stdout, errs)
			}
			if !strings.Contains(errs, c.want) {
				t.Errorf("stderr %q lacks %q", errs, c.want)
			}
		})
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"v.onnx"}) {
		t.Errorf("directory holds %v, want v.onnx only", got)
	}
	// Where a flag does apply it is taken: parity's synthetic inputs take --seed, and bench
	// applies --preset to the variants of a list that also holds a file.
	if code, _, errs := zoo(t, "parity", "../../onnx/testdata/torch/enc_relu_op17.onnx", "--seed", "3"); strings.Contains(errs, "does not apply") {
		t.Errorf("parity --seed on a float-input file: exit %d, %s", code, errs)
	}
	code, stdout, errs := zoo(t, "bench", file, "vanilla", "--preset", "tiny", "--seq", "16", "--reps", "1", "--json")
	if code != 0 {
		t.Fatalf("bench file + variant --preset: exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, `"variant": "vanilla.tiny"`) || !strings.Contains(stdout, `"variant": "`+file+`"`) {
		t.Errorf("bench rows lack the file or vanilla.tiny:\n%s", stdout)
	}
}

// An existing read-only output file is not replaced: exit 2, the file untouched.
func TestReadOnlyOutputKept(t *testing.T) {
	dir := t.TempDir()
	ro := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("keep"), 0o444); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		args []string
		path string
	}{
		{"export --onnx -o", []string{"export", "vanilla.tiny", "--onnx", "-o"}, ro("a.onnx")},
		{"export --weights", []string{"export", "vanilla.tiny", "--weights"}, ro("w.safetensors")},
		{"bench --plot", []string{"bench", "vanilla.tiny", "--seq", "16", "--plot"}, ro("p.png")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := zoo(t, append(c.args, c.path)...)
			if code != 2 || !strings.Contains(errs, "read-only") || !strings.Contains(errs, c.path) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming the read-only file", code, errs)
			}
			if data, _ := os.ReadFile(c.path); string(data) != "keep" {
				t.Errorf("%s was replaced: %q", c.path, data)
			}
		})
	}
	// The default name of a one-variant export is checked too.
	t.Chdir(dir)
	p := ro("vanilla.tiny.onnx")
	if code, _, errs := zoo(t, "export", "vanilla", "--preset", "tiny", "--onnx"); code != 2 || !strings.Contains(errs, "read-only") {
		t.Errorf("default name: exit %d, stderr %q", code, errs)
	}
	if data, _ := os.ReadFile(p); string(data) != "keep" {
		t.Errorf("%s was replaced", p)
	}
}

func TestCheckOutputPath(t *testing.T) {
	dir := t.TempDir()
	writable := filepath.Join(dir, "w.onnx")
	os.WriteFile(writable, []byte("x"), 0o644)
	readOnly := filepath.Join(dir, "r.onnx")
	os.WriteFile(readOnly, []byte("x"), 0o444)
	link := filepath.Join(dir, "link.onnx")
	if err := os.Symlink(readOnly, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		want string // "" for nil
	}{
		{filepath.Join(dir, "new.onnx"), ""},
		{writable, ""},
		{readOnly, "read-only"},
		{link, "read-only"},
		{dir, "is a directory"},
		{filepath.Join(dir, "no", "x.onnx"), "does not exist"},
	}
	for _, c := range cases {
		err := checkOutputPath(c.path)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkOutputPath(%s) = %v, want %q", c.path, err, c.want)
		}
	}
	if got := dirNames(t, dir); len(got) != 3 {
		t.Errorf("the check left files behind: %v", got)
	}
}

// A one-model export says what it wrote in JSON too: the weights, then the ONNX file.
func TestExportOneJSON(t *testing.T) {
	dir := t.TempDir()
	onnxPath, weights := filepath.Join(dir, "a.onnx"), filepath.Join(dir, "w.safetensors")
	code, out, errs := zoo(t, "export", "vanilla.tiny", "--onnx", "-o", onnxPath, "--weights", weights, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep export.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(rep.Written) != 2 {
		t.Fatalf("written %+v, want 2 files", rep.Written)
	}
	for i, want := range []struct{ kind, path string }{{"weights", weights}, {"onnx", onnxPath}} {
		f := rep.Written[i]
		st, err := os.Stat(want.path)
		if f.Kind != want.kind || f.Path != want.path || f.Model != "vanilla.tiny" || err != nil || st.Size() != f.Bytes {
			t.Errorf("entry %d = %+v, want %s at %s with its size (%v)", i, f, want.kind, want.path, err)
		}
	}
	if w := rep.Written[0]; w.Tensors < 1 || w.Parameters < 1 || w.Opset != 0 {
		t.Errorf("weights entry %+v: want tensors and parameters, no opset", w)
	}
}
