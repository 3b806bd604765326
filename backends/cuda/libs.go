package cuda

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/zoo-dev/zoo/internal/env"
)

// LibPathEnv lists extra directories (colon-separated) searched for the CUDA libraries
// before the standard places.
const LibPathEnv = env.CUDALibPath

// Library sonames, newest first. The driver is only ever libcuda.so.1.
var (
	driverLib   = []string{"libcuda.so.1"}
	cublasLibs  = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}
	cublasLtFor = map[string]string{"libcublas.so.13": "libcublasLt.so.13", "libcublas.so.12": "libcublasLt.so.12", "libcublas.so": "libcublasLt.so"}
	nvrtcLibs   = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}
)

// libDirs returns the directories searched after the dynamic linker's own search (which
// covers LD_LIBRARY_PATH and ldconfig): $ZOO_CUDA_LIB_PATH, $CUDA_HOME/lib64,
// $CUDA_PATH/lib64, /usr/local/cuda/lib64, and the lib folders of NVIDIA's Python wheels
// (nvidia/*/lib under site- and dist-packages).
func libDirs() []string {
	var dirs []string
	paths, _ := env.Get(LibPathEnv)
	for _, d := range strings.Split(paths, ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if h := os.Getenv(env); h != "" {
			dirs = append(dirs, filepath.Join(h, "lib64"), filepath.Join(h, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu")
	var globs []string
	home, _ := os.UserHomeDir()
	for _, base := range []string{"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages", "/opt/conda/lib/python3*/site-packages", "/opt/*/.venv/lib/python3*/site-packages", home + "/.local/lib/python3*/site-packages"} {
		globs = append(globs, base+"/nvidia/*/lib", base+"/nvidia/cu*/lib")
	}
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		dirs = append(dirs, m...)
	}
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// candidates returns the paths to try for each soname, in order: the bare soname first,
// then each search directory that holds the file.
func candidates(sonames []string, dirs []string) []string {
	var out []string
	for _, s := range sonames {
		out = append(out, s)
		for _, d := range dirs {
			p := filepath.Join(d, s)
			if _, err := os.Stat(p); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}
