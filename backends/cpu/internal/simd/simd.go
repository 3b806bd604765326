// Package simd holds the SIMD level of the CPU backend's kernels: which instruction set the
// matrix products (package gemm) and the vector kernels (package vec) run on. One setting
// pins every SIMD path of the backend.
//
// The level is the best this CPU and build can run (Detect) until Set chooses another. No
// package reads the environment at initialisation: a program applies ZOO_CPU by calling
// ApplyEnv (the zoo CLI does it at start-up and exits 2 when it fails; the tests of the
// packages that run kernels do it in TestMain, so `ZOO_CPU=avx2 go test ./backends/...`
// tests that level).
package simd

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/internal/suggest"
)

// Level is a SIMD level; a higher value is a wider instruction set.
type Level uint8

const (
	// Generic is pure Go, available on every GOARCH and with the purego build tag.
	Generic Level = iota
	// AVX2 needs AVX2 and FMA3.
	AVX2
	// AVX512 needs AVX-512F.
	AVX512
)

// Auto is the name that asks Set for the best available level.
const Auto = "auto"

var names = [...]string{Generic: "generic", AVX2: "avx2", AVX512: "avx512"}

// needs names the CPU features each level needs, for error messages.
var needs = [...]string{Generic: "nothing", AVX2: "AVX2 and FMA", AVX512: "AVX-512F"}

// String returns the level's name: "generic", "avx2" or "avx512".
func (l Level) String() string {
	if int(l) < len(names) {
		return names[l]
	}
	return fmt.Sprintf("level(%d)", l)
}

// Names returns every level name Set accepts, best first, "auto" first of all.
func Names() []string { return []string{Auto, AVX512.String(), AVX2.String(), Generic.String()} }

// detected is what this CPU and build can run, best first; Generic is always last. It is
// read from the CPU once (golang.org/x/sys/cpu), which is no environment read.
var detected = available()

// Available returns the levels this CPU and build can run, best first; Generic is last.
func Available() []Level { return append([]Level(nil), detected...) }

// AvailableNames returns the names of Available's levels, best first (what tests iterate
// over to run every level this machine has).
func AvailableNames() []string {
	names := make([]string, len(detected))
	for i, l := range detected {
		names[i] = l.String()
	}
	return names
}

// Supported reports whether this CPU and build can run l.
func Supported(l Level) bool {
	for _, a := range detected {
		if a == l {
			return true
		}
	}
	return false
}

// Detect returns the best level this CPU and build can run.
func Detect() Level { return detected[0] }

// chosen holds the level Set chose plus one; 0 means none was chosen (Detect applies).
var chosen atomic.Uint32

// Current returns the level the kernels use now: the one Set chose, else Detect().
// Calls already running when Set changes it finish on the level they started with.
func Current() Level {
	if v := chosen.Load(); v != 0 {
		return Level(v - 1)
	}
	return Detect()
}

// Set selects the level by name ("avx512", "avx2", "generic", or "auto" or "" for the best
// available; case is ignored). It changes nothing and returns an error when the name is
// unknown or this CPU or build cannot run that level. It is meant for start-up, tests and
// benchmarks.
func Set(name string) error {
	l, err := parse(name, detected)
	if err != nil {
		return err
	}
	chosen.Store(uint32(l) + 1)
	return nil
}

// parse resolves name against the levels avail (best first).
func parse(name string, avail []Level) (Level, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" || name == Auto {
		return avail[0], nil
	}
	for l, n := range names {
		if n != name {
			continue
		}
		for _, a := range avail {
			if a == Level(l) {
				return a, nil
			}
		}
		return 0, fmt.Errorf("kernel level %s needs %s, which this CPU (or this build) lacks; available: %s", name, needs[l], list(avail))
	}
	return 0, fmt.Errorf("unknown kernel level %q%s; want one of %s", name, suggest.DidYouMean(name, Names()), strings.Join(Names(), ", "))
}

func list(ls []Level) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.String()
	}
	return strings.Join(s, ", ")
}

// ApplyEnv sets the level from ZOO_CPU (internal/env); unset or empty selects the best
// level (auto). On error the level is unchanged; the error names the variable and its value.
func ApplyEnv() error {
	v, err := env.Get(env.CPU)
	if err != nil {
		return err
	}
	if err := Set(v); err != nil {
		return fmt.Errorf("%s=%q: %w", env.CPU, v, err)
	}
	return nil
}
