package simd

import (
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/env"
)

func TestParse(t *testing.T) {
	avx2Only := []Level{AVX2, Generic}
	cases := []struct {
		name  string
		avail []Level
		want  Level
		err   string
	}{
		{"", avx2Only, AVX2, ""},
		{"auto", []Level{AVX512, AVX2, Generic}, AVX512, ""},
		{" AVX2 ", avx2Only, AVX2, ""},
		{"generic", avx2Only, Generic, ""},
		{"avx512", avx2Only, 0, "kernel level avx512 needs AVX-512F, which this CPU (or this build) lacks; available: avx2, generic"},
		{"avx2", []Level{Generic}, 0, "needs AVX2 and FMA"},
		{"sse2", avx2Only, 0, `unknown kernel level "sse2"; want one of auto, avx512, avx2, generic`},
		{"avx", avx2Only, 0, `(did you mean "avx2"?)`},
	}
	for _, c := range cases {
		got, err := parse(c.name, c.avail)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parse(%q, %v) = %v, %v; want an error with %q", c.name, c.avail, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parse(%q, %v) = %v, %v; want %v", c.name, c.avail, got, err, c.want)
		}
	}
}

func TestSet(t *testing.T) {
	defer Set(Current().String())
	prev := Current()
	if err := Set("no-such-level"); err == nil || Current() != prev {
		t.Fatalf("Set(no-such-level) = %v and the level is %v (was %v)", err, Current(), prev)
	}
	for _, l := range Available() {
		if err := Set(l.String()); err != nil || Current() != l {
			t.Errorf("Set(%s) = %v, level %v", l, err, Current())
		}
	}
	if err := Set(Auto); err != nil || Current() != Detect() {
		t.Errorf("Set(auto) = %v, level %v, want %v", err, Current(), Detect())
	}
	if av := Available(); av[len(av)-1] != Generic || av[0] != Detect() {
		t.Errorf("Available() = %v: want Detect() first and generic last", av)
	}
	for _, l := range []Level{AVX512, AVX2} {
		if !Supported(l) {
			if err := Set(l.String()); err == nil || !strings.Contains(err.Error(), "lacks") {
				t.Errorf("Set(%s) on a CPU without it = %v", l, err)
			}
		}
	}
}

func TestApplyEnv(t *testing.T) {
	defer Set(Current().String())
	t.Setenv(env.CPU, "generic")
	if err := ApplyEnv(); err != nil || Current() != Generic {
		t.Errorf("ZOO_CPU=generic: %v, level %v", err, Current())
	}
	t.Setenv(env.CPU, "sse2")
	err := ApplyEnv()
	if err == nil || !strings.HasPrefix(err.Error(), `ZOO_CPU="sse2": `) || Current() != Generic {
		t.Errorf("ZOO_CPU=sse2: %v, level %v; want an error naming the variable, the level unchanged", err, Current())
	}
	t.Setenv(env.CPU, "")
	if err := ApplyEnv(); err != nil || Current() != Detect() {
		t.Errorf("ZOO_CPU empty: %v, level %v; want the best, %v", err, Current(), Detect())
	}
}

// TestNamesMatchEnvTable keeps internal/env's check of ZOO_CPU and the levels Set knows equal.
func TestNamesMatchEnvTable(t *testing.T) {
	v, _ := env.Lookup(env.CPU)
	if v.Syntax != strings.Join(Names(), "|") {
		t.Errorf("internal/env documents ZOO_CPU as %q, simd knows %q", v.Syntax, strings.Join(Names(), "|"))
	}
	for _, n := range Names() {
		if err := v.Check(n); err != nil {
			t.Errorf("internal/env refuses level %s: %v", n, err)
		}
	}
}
