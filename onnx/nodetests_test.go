package onnx_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/onnx/nodetests"
)

// TestONNXNodeTests runs ONNX's own operator conformance suite (onnx/nodetests) on the
// CPU backend. The tests are not committed (27 MB): testdata/nodetests/gen.py writes them in
// about five seconds with Debian's python3-onnx, which CI installs; the test skips where
// python3-onnx is missing, or reads $ZOO_ONNX_NODE_TESTS when that names a directory gen.py
// wrote. It fails on a wrong answer, a crash, a hang, or a refusal of more than one line;
// testdata/nodetests/passing.txt lists the tests that pass: one that stops passing fails the
// test too, and one that starts passing asks for the list to be rewritten
// (ZOO_UPDATE_NODETESTS=1). The log holds the counts per operator, for the encoder subset
// (nodetests.EncoderOps) and the whole suite; ZOO_NODETESTS_REPORT=FILE also writes one line
// per test (name, operator, subset, outcome, detail), tab-separated.
func TestONNXNodeTests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: ONNX's node tests take a few seconds to write and run")
	}
	dir := os.Getenv(nodeTestsEnv)
	if dir == "" {
		var err error
		dir, err = nodetests.Generate("testdata/nodetests/gen.py", t.TempDir())
		if errors.Is(err, nodetests.ErrNoGenerator) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	tests, err := nodetests.List(dir)
	if err != nil {
		t.Fatalf("%v (write the tests with /usr/bin/python3 testdata/nodetests/gen.py DIR and set %s=DIR)", err, nodeTestsEnv)
	}
	if len(tests) == 0 {
		t.Fatalf("no node tests in %s/node", dir)
	}
	outcomes := map[string]nodetests.Outcome{}
	for _, nt := range tests {
		o := nodetests.Run(nt, cpu.Backend{}, backends.Options{Threads: 1})
		if o.Status == nodetests.Refused && strings.Contains(o.Detail, "\n") {
			t.Errorf("%s (%s): the refusal is more than one line:\n%s", nt.Name, nt.Op, o.Detail)
		}
		if o.Bad() {
			t.Errorf("%s (%s): %s: %s", nt.Name, nt.Op, o.Status, o.Detail)
		}
		outcomes[nt.Name] = o
	}
	report, _, _ := nodetests.Report("CPU", tests, outcomes)
	t.Log(report)
	if path := os.Getenv(nodeTestsReport); path != "" {
		if err := os.WriteFile(path, []byte(nodetests.TSV(tests, outcomes)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkPassingList(t, tests, outcomes)
}

const (
	nodeTestsEnv     = "ZOO_ONNX_NODE_TESTS"
	nodeTestsUpdate  = "ZOO_UPDATE_NODETESTS"
	nodeTestsReport  = "ZOO_NODETESTS_REPORT"
	nodeTestsPassing = "testdata/nodetests/passing.txt"
)

// checkPassingList compares the passes with testdata/nodetests/passing.txt (or rewrites it).
func checkPassingList(t *testing.T, tests []nodetests.Test, outcomes map[string]nodetests.Outcome) {
	var passing []string
	for _, nt := range tests {
		if outcomes[nt.Name].Status == nodetests.Pass {
			passing = append(passing, nt.Name)
		}
	}
	if os.Getenv(nodeTestsUpdate) == "1" {
		text := "# ONNX 1.12's node tests that zoo's CPU backend passes (onnx/nodetests_test.go; rewrite with ZOO_UPDATE_NODETESTS=1)\n" + strings.Join(passing, "\n") + "\n"
		if err := os.WriteFile(nodeTestsPassing, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d passing tests", nodeTestsPassing, len(passing))
		return
	}
	data, err := os.ReadFile(filepath.FromSlash(nodeTestsPassing))
	if err != nil {
		t.Fatalf("%v (write it with %s=1)", err, nodeTestsUpdate)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			listed[line] = true
		}
	}
	var newly []string
	for _, nt := range tests {
		o := outcomes[nt.Name]
		switch {
		case listed[nt.Name] && o.Status != nodetests.Pass:
			t.Errorf("%s (%s) passed before and now is %s: %s", nt.Name, nt.Op, o.Status, o.Detail)
		case !listed[nt.Name] && o.Status == nodetests.Pass:
			newly = append(newly, nt.Name)
		}
	}
	if len(newly) > 0 {
		t.Errorf("%d tests pass that %s does not list (%s): rewrite it with %s=1", len(newly), nodeTestsPassing, strings.Join(newly, ", "), nodeTestsUpdate)
	}
}
