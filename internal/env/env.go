// Package env is the one table of zoo's environment variables: every ZOO_* name, what it
// does, what applies when it is unset, and the check its value must pass. `zoo help
// environment` prints the table and the README's environment section is generated from it
// (a test keeps the two equal).
//
// A new variable is one entry in vars below, then `go test ./internal/env -update` to rewrite
// the README's table. Code reads it through Get, Int,
// Duration or Bool, never through os.Getenv, so that the CLI's start-up check (Problems) and
// the reader agree on what a valid value is. A test scans the module for ZOO_* names that
// are missing here.
package env

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zoo-dev/zoo/internal/suggest"
)

// The variables, by name. Code passes these constants to Get and friends.
const (
	Backend            = "ZOO_BACKEND"
	Threads            = "ZOO_THREADS"
	CPU                = "ZOO_CPU"
	Int8               = "ZOO_INT8"
	Config             = "ZOO_CONFIG"
	Verbose            = "ZOO_VERBOSE"
	PluginStartTimeout = "ZOO_PLUGIN_START_TIMEOUT"
	PluginBuildTimeout = "ZOO_PLUGIN_BUILD_TIMEOUT"
	PluginInProcess    = "ZOO_PLUGIN_INPROCESS"
	ORTLib             = "ZOO_ORT_LIB"
	CUDADevice         = "ZOO_CUDA_DEVICE"
	CUDAPrecision      = "ZOO_CUDA_PRECISION"
	CUDALibPath        = "ZOO_CUDA_LIB_PATH"
	Src                = "ZOO_SRC"
	MemoryLimit        = "ZOO_MEMORY_LIMIT"
	APIKey             = "ZOO_API_KEY"
	RequirePinned      = "ZOO_REQUIRE_PINNED"

	PluginLogLevel = "ZOO_PLUGIN_LOG_LEVEL"
	PluginCookie   = "ZOO_VARIANT_PLUGIN"
	PluginID       = "ZOO_PLUGIN_ID"

	TorchExports      = "ZOO_TORCH_EXPORTS"
	BenchNoFusion     = "ZOO_BENCH_NOFUSION"
	GPUTests          = "ZOO_GPU_TESTS"
	GPUBench          = "ZOO_GPU_BENCH"
	GPUBenchN         = "ZOO_GPU_BENCH_N"
	TestRegistry      = "ZOO_REGISTRY"
	BenchTestCLI      = "ZOO_BENCH_TEST_CLI"
	PluginTestMode    = "ZOO_PLUGINTEST_MODE"
	PluginTestPidFile = "ZOO_PLUGINTEST_PIDFILE"
	TestChild         = "ZOO_TEST_CHILD"
	CPUPeakChild      = "ZOO_CPU_PEAK_CHILD"
	PPOCRDir          = "ZOO_PPOCR_DIR"
	UpdateRealGraphs  = "ZOO_UPDATE_REALGRAPHS"
	TestArtifacts     = "ZOO_TEST_ARTIFACTS"
	ONNXNodeTests     = "ZOO_ONNX_NODE_TESTS"
	UpdateNodeTests   = "ZOO_UPDATE_NODETESTS"
	NodeTestsReport   = "ZOO_NODETESTS_REPORT"
	OpenAINode        = "ZOO_OPENAI_NODE"
	TokenizersJS      = "ZOO_TOKENIZERS_JS"
)

// Scope says who sets a variable.
type Scope int

const (
	// User variables are for users and scripts; the CLI checks them at start-up.
	User Scope = iota
	// Internal variables are set by zoo for the plugin processes it starts.
	Internal
	// Test variables steer tests and benchmarks only; zoo itself ignores them.
	Test
)

// String names the scope as the tables print it.
func (s Scope) String() string {
	switch s {
	case Internal:
		return "internal"
	case Test:
		return "test only"
	}
	return "user"
}

// Var is one entry of the table.
type Var struct {
	Name    string
	Syntax  string // what a value looks like, e.g. "N" or "auto|avx512|avx2|generic"
	Default string // what applies when the variable is unset or empty, in words
	Doc     string // one sentence
	Scope   Scope
	check   func(string) error // nil: any value
}

// Check reports whether value is valid for v, as an error that names the variable and the
// value (nil for an empty value: empty means unset).
func (v Var) Check(value string) error {
	value = strings.TrimSpace(value)
	if value == "" || v.check == nil {
		return nil
	}
	if err := v.check(value); err != nil {
		return fmt.Errorf("%s=%q: %v", v.Name, value, err)
	}
	return nil
}

var vars = []Var{
	{Name: Backend, Syntax: "cpu|cuda|auto", Default: "the config file, then the fastest available backend",
		Doc: "Backend to run on, as --backend (which wins over it); an unknown name is an error."},
	{Name: Threads, Syntax: "N", Default: "GOMAXPROCS (the CPU count)",
		Doc: "Worker threads of the CPU backend; --threads wins over it.", check: positiveInt},
	{Name: CPU, Syntax: "auto|avx512|avx2|generic", Default: "auto: the best level this CPU runs",
		Doc: "SIMD kernel level of the CPU backend; a level this CPU lacks is an error.", check: oneOf("auto", "avx512", "avx2", "generic")},
	{Name: Int8, Syntax: "auto|amx-int8|vnni512|avx-vnni|avx2|generic", Default: "auto: the best int8 path the kernel level runs",
		Doc:   "int8 path of the CPU backend (--precision int8): ZOO_CPU=avx2 ZOO_INT8=avx2 runs what an AVX2-only CPU has; a path this CPU or level cannot run is an error.",
		check: oneOf("auto", "amx-int8", "vnni512", "avx-vnni", "avx2", "generic")},
	{Name: Config, Syntax: "FILE", Default: "os.UserConfigDir()/zoo/config.yaml",
		Doc: "The config file (per-machine default backend)."},
	{Name: Verbose, Syntax: "0|1", Default: "0",
		Doc: "1 is --verbose: plugin logs, timings and the compile report on stderr.", check: boolean},
	{Name: PluginStartTimeout, Syntax: "DURATION", Default: "20s",
		Doc: "Bound on a plugin's start-up and Describe, a Go duration such as 30s.", check: positiveDuration},
	{Name: PluginBuildTimeout, Syntax: "DURATION", Default: "10m",
		Doc: "Bound on one plugin Build, a Go duration such as 10m.", check: positiveDuration},
	{Name: PluginInProcess, Syntax: "0|1", Default: "0",
		Doc: "1 serves built-in variants inside the zoo process (for debuggers).", check: boolean},
	{Name: MemoryLimit, Syntax: "SIZE|off", Default: "the cgroup's limit, else MemAvailable",
		Doc: "Caps the memory the memory guard counts as available (512MiB, 8GiB, bytes); off turns the checks off; internal/memlimit parses it."},
	{Name: RequirePinned, Syntax: "0|1", Default: "0",
		Doc: "1 is --require-pinned: refuse to start a third-party plugin that its registry does not pin by sha256.", check: boolean},
	{Name: ORTLib, Syntax: "FILE", Default: "$XDG_DATA_HOME/zoo/onnxruntime, then ./node_modules/onnxruntime-node",
		Doc: "libonnxruntime.so.1 for parity and bench --against onnxruntime; a missing file is an error there."},
	{Name: CUDADevice, Syntax: "N", Default: "0",
		Doc: "CUDA device ordinal (CUDA_VISIBLE_DEVICES also applies).", check: nonNegativeInt},
	{Name: CUDAPrecision, Syntax: "fp32|tf32|bf16", Default: "fp32",
		Doc: "Matrix-product precision of the CUDA backend.", check: oneOf("fp32", "tf32", "bf16")},
	{Name: CUDALibPath, Syntax: "DIR[:DIR...]", Default: "the standard CUDA and pip-wheel places",
		Doc: "Extra directories searched first for libcublas and libnvrtc."},
	{Name: APIKey, Syntax: "KEY", Default: "unset: zoo serve checks no key",
		Doc: "API key zoo serve requires as Authorization: Bearer KEY, as --api-key (which wins over it)."},
	{Name: Src, Syntax: "DIR", Default: "the checkout around the current directory, then the one zoo was built from",
		Doc: "zoo checkout that `zoo plugin new` points the new module's replace directive at."},

	{Name: PluginLogLevel, Syntax: "LEVEL", Default: "info", Scope: Internal,
		Doc: "Log level zoo passes to its plugin processes (debug under --verbose)."},
	{Name: PluginCookie, Syntax: "COOKIE", Default: "unset", Scope: Internal,
		Doc: "go-plugin handshake cookie that marks a process as started by zoo."},
	{Name: PluginID, Syntax: "PID.N", Default: "unset", Scope: Internal,
		Doc: "Marks one plugin process and the processes it starts, so that zoo can find and kill all of them (Linux)."},

	{Name: TorchExports, Syntax: "DIR", Default: "unset: the benchmark skips", Scope: Test,
		Doc: "PyTorch exports for BenchmarkTorchExportVsORT (scripts/torch_encoder_export.py)."},
	{Name: BenchNoFusion, Syntax: "1", Default: "unset", Scope: Test,
		Doc: "Runs the unfused encoder benchmark rows under -short too."},
	{Name: GPUTests, Syntax: "1", Default: "unset: GPU tests skip without a GPU", Scope: Test,
		Doc: "A missing GPU fails the CUDA tests instead of skipping them."},
	{Name: GPUBench, Syntax: "1", Default: "unset: the CUDA benchmark skips", Scope: Test,
		Doc: "Runs TestBenchVanilla (vanilla base on the GPU, each precision, fused and unfused; scripts/gpu-check.sh)."},
	{Name: GPUBenchN, Syntax: "N[,N...]", Default: "512,2048", Scope: Test,
		Doc: "Sequence lengths of TestBenchVanilla."},
	{Name: TestRegistry, Syntax: "FILE", Default: "the repository's registry.yaml", Scope: Test,
		Doc: "Registry the CUDA variant tests read."},
	{Name: BenchTestCLI, Syntax: "1", Default: "unset", Scope: Test,
		Doc: "Makes the cmd/zoo test binary run the CLI (real-process tests)."},
	{Name: PluginTestMode, Syntax: "MODE", Default: "unset", Scope: Test,
		Doc: "Makes a test binary serve one of plugintest's misbehaving plugins."},
	{Name: PluginTestPidFile, Syntax: "FILE", Default: "unset", Scope: Test,
		Doc: "Where plugintest's plugins write the pids of their children."},
	{Name: TestChild, Syntax: "1", Default: "unset", Scope: Test,
		Doc: "Marks a test binary re-executed by its own test."},
	{Name: CPUPeakChild, Syntax: "1", Default: "unset", Scope: Test,
		Doc: "Marks the child process of the CPU backend's peak-memory test."},
	{Name: PPOCRDir, Syntax: "DIR", Default: "/tmp/zoo-ppocr: the PP-OCRv4 tests skip when absent", Scope: Test,
		Doc: "PaddleOCR's PP-OCRv4 recogniser and its extracted encoder (onnx/testdata/realgraphs/ppocr_encoder.py)."},
	{Name: UpdateRealGraphs, Syntax: "1", Default: "unset", Scope: Test,
		Doc: "Rewrites the realgraphs fixtures' expected outputs from ONNX Runtime."},
	{Name: TestArtifacts, Syntax: "DIR", Default: "unset: artefacts go to the test's temporary directory", Scope: Test,
		Doc: "Where tests keep what a person may want to look at afterwards (the compare report's screenshot)."},
	{Name: ONNXNodeTests, Syntax: "DIR", Default: "unset: onnx's test writes them with onnx/testdata/nodetests/gen.py (CUDA's test skips)", Scope: Test,
		Doc: "ONNX's backend node tests, as onnx/testdata/nodetests/gen.py writes them (TestONNXNodeTests, TestONNXNodeTestsCUDA)."},
	{Name: UpdateNodeTests, Syntax: "1", Default: "unset", Scope: Test,
		Doc: "Rewrites onnx/testdata/nodetests/passing.txt, the node tests the CPU backend passes."},
	{Name: NodeTestsReport, Syntax: "FILE", Default: "unset", Scope: Test,
		Doc: "Where TestONNXNodeTests writes one line per node test (name, operator, subset, outcome, detail)."},
	{Name: OpenAINode, Syntax: "DIR", Default: "unset: the OpenAI SDK test skips", Scope: Test,
		Doc: "node_modules holding the official openai npm package, which a zoo serve test drives as a client (.ci/run installs it)."},
	{Name: TokenizersJS, Syntax: "DIR", Default: "unset: the live pair-encoding check skips", Scope: Test,
		Doc: "node_modules holding @huggingface/tokenizers, the reference for pair encodings (.ci/run installs it)."},
}

// All returns the table: user variables first, then internal, then test-only ones.
func All() []Var {
	out := append([]Var(nil), vars...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}

// Lookup returns the entry for name, and false when name is not in the table.
func Lookup(name string) (Var, bool) {
	for _, v := range vars {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// Get returns the value of the variable name with surrounding space removed ("" when unset)
// and the error of its check, if any; the value comes back with the error so that a library
// can fall back to its default (the CLI refuses bad values at start-up). A name missing from
// the table is an error.
func Get(name string) (string, error) {
	v, ok := Lookup(name)
	if !ok {
		return "", fmt.Errorf("environment variable %s is not in zoo's table (internal/env)", name)
	}
	s := strings.TrimSpace(os.Getenv(name))
	return s, v.Check(s)
}

// Int returns the variable as an integer; set is false when it is unset or empty. A value
// that fails the variable's check is an error.
func Int(name string) (n int, set bool, err error) {
	s, err := Get(name)
	if s == "" || err != nil {
		return 0, s != "", err
	}
	n, err = strconv.Atoi(s)
	if err != nil {
		return 0, true, fmt.Errorf("%s=%q: want an integer", name, s)
	}
	return n, true, nil
}

// Duration returns the variable as a Go duration; set is false when it is unset or empty.
// A value that fails the variable's check is an error.
func Duration(name string) (d time.Duration, set bool, err error) {
	s, err := Get(name)
	if s == "" || err != nil {
		return 0, s != "", err
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, true, fmt.Errorf("%s=%q: want a duration such as 30s or 10m", name, s)
	}
	return d, true, nil
}

// Bool returns the variable as a boolean: 1 or true is true; unset, empty, 0 or false is
// false; anything else is an error (and false).
func Bool(name string) (bool, error) {
	s, err := Get(name)
	if err != nil {
		return false, err
	}
	b, _ := strconv.ParseBool(s)
	return b, nil
}

// Problems checks environ (os.Environ's form, KEY=VALUE) against the table. It returns
// one error per user variable whose value fails its check, and one warning line per ZOO_*
// name the table does not know, with the closest known name. Internal and test-only
// variables are not checked (zoo does not read them).
func Problems(environ []string) (errs []error, warnings []string) {
	names := make([]string, len(vars))
	for i, v := range vars {
		names[i] = v.Name
	}
	for _, kv := range environ {
		k, val, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "ZOO_") {
			continue
		}
		v, ok := Lookup(k)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("unknown environment variable %s ignored%s; see `zoo help environment`", k, suggest.DidYouMean(k, names)))
			continue
		}
		if v.Scope != User {
			continue
		}
		if err := v.Check(val); err != nil {
			errs = append(errs, err)
		}
	}
	return errs, warnings
}

func positiveInt(s string) error {
	if n, err := strconv.Atoi(s); err != nil || n <= 0 {
		return fmt.Errorf("want a positive integer")
	}
	return nil
}

func nonNegativeInt(s string) error {
	if n, err := strconv.Atoi(s); err != nil || n < 0 {
		return fmt.Errorf("want a device ordinal (0, 1, ...)")
	}
	return nil
}

func positiveDuration(s string) error {
	if d, err := time.ParseDuration(s); err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration such as 30s or 10m")
	}
	return nil
}

func boolean(s string) error {
	if _, err := strconv.ParseBool(s); err != nil {
		return fmt.Errorf("want 1 or 0")
	}
	return nil
}

func oneOf(choices ...string) func(string) error {
	return func(s string) error {
		for _, c := range choices {
			if strings.EqualFold(s, c) {
				return nil
			}
		}
		return fmt.Errorf("want one of %s%s", strings.Join(choices, ", "), suggest.DidYouMean(strings.ToLower(s), choices))
	}
}
