//go:build cgo && linux

package cuda

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/internal/env"
)

// libs records what was loaded, for messages and for device setup.
type libs struct {
	driverVer    int // e.g. 13000
	cublasPath   string
	cublasVer    string
	nvrtcPath    string
	nvrtcMajor   int
	nvrtcMinor   int
	ordinal      int
	dev          int
	name         string
	mem          uint64
	major, minor int
	sms          int
}

var (
	loadOnce sync.Once
	loaded   *libs
	loadErr  error
)

// load dlopens the driver and libraries and queries the device, once per process. Its
// error is the exact reason the backend is unavailable.
func load() (*libs, error) {
	loadOnce.Do(func() { loaded, loadErr = doLoad() })
	return loaded, loadErr
}

func doLoad() (*libs, error) {
	l := &libs{}
	h, _, derr := dlopenAny(driverLib)
	if h == nil {
		if strings.Contains(derr, "No such file") || derr == "" {
			return nil, fmt.Errorf("libcuda.so.1 not found: no NVIDIA driver installed")
		}
		return nil, fmt.Errorf("libcuda.so.1 not found: no NVIDIA driver installed (%s)", derr)
	}
	if miss := bindCUDA(h); miss != "" {
		return nil, fmt.Errorf("libcuda.so.1 lacks %s: the NVIDIA driver is too old (CUDA %d.%d or newer is required)", miss, minDriver/1000, minDriver%1000/10)
	}
	if err := cuInit(); err != nil {
		return nil, err
	}
	v, err := cuDriverVersion()
	if err != nil {
		return nil, err
	}
	l.driverVer = v
	if v < minDriver {
		return nil, fmt.Errorf("driver version %s is older than the required %s", verString(v), verString(minDriver))
	}
	n, err := cuDeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("the NVIDIA driver (%s) sees no CUDA device", verString(v))
	}
	if s, _ := env.Get(DeviceEnv); s != "" {
		o, err := strconv.Atoi(s)
		if err != nil || o < 0 || o >= n {
			return nil, fmt.Errorf("%s=%q is not a device ordinal (this machine has %d device(s): 0..%d)", DeviceEnv, s, n, n-1)
		}
		l.ordinal = o
	}
	if l.dev, err = cuDevice(l.ordinal); err != nil {
		return nil, err
	}
	if l.name, err = cuDeviceName(l.dev); err != nil {
		return nil, err
	}
	if l.mem, err = cuDeviceMem(l.dev); err != nil {
		return nil, err
	}
	if l.major, err = cuAttr(l.dev, attrComputeMajor); err != nil {
		return nil, err
	}
	if l.minor, err = cuAttr(l.dev, attrComputeMinor); err != nil {
		return nil, err
	}
	l.sms, _ = cuAttr(l.dev, attrSMCount)

	dirs := libDirs()
	// cuBLAS: preload cuBLASLt from the same place, since libcublas needs it.
	var tried []string
	for _, so := range cublasLibs {
		for _, p := range candidates([]string{so}, dirs) {
			tried = append(tried, p)
			lt := cublasLtFor[so]
			if p != so {
				lt = filepath.Join(filepath.Dir(p), lt)
			}
			dlopenAny([]string{lt})
			hb, path, _ := dlopenAny([]string{p})
			if hb == nil {
				continue
			}
			if miss := bindCUBLAS(hb); miss != "" {
				return nil, fmt.Errorf("%s lacks %s: cuBLAS is too old (%d or newer is required)", path, miss, minCUBLAS)
			}
			l.cublasPath = path
			break
		}
		if l.cublasPath != "" {
			break
		}
	}
	if l.cublasPath == "" {
		return nil, fmt.Errorf("cuBLAS not found (tried %s): install the CUDA toolkit or the nvidia-cublas wheel, or set %s", strings.Join(dedupe(tried), ", "), LibPathEnv)
	}
	major, ver := cublasVersion()
	l.cublasVer = ver
	if major < minCUBLAS {
		return nil, fmt.Errorf("cuBLAS %s (%s) is older than the required %d.0", ver, l.cublasPath, minCUBLAS)
	}
	hn, npath, _ := dlopenAny(candidates(nvrtcLibs, dirs))
	if hn == nil {
		return nil, fmt.Errorf("NVRTC not found (tried %s in the library path and %s): install the CUDA toolkit or the nvidia-cuda-nvrtc wheel, or set %s",
			strings.Join(nvrtcLibs, ", "), strings.Join(dirs, ", "), LibPathEnv)
	}
	// NVRTC loads its builtins library by soname at the first compile; where it was found in
	// a search directory (a wheel's lib folder, not on the linker's path), load the builtins
	// beside it first so that the compile finds them already loaded.
	if dir := filepath.Dir(npath); dir != "." {
		if m, _ := filepath.Glob(filepath.Join(dir, "libnvrtc-builtins.so*")); len(m) > 0 {
			dlopenAny(m)
		}
	}
	if miss := bindNVRTC(hn); miss != "" {
		return nil, fmt.Errorf("%s lacks %s: NVRTC is too old", npath, miss)
	}
	l.nvrtcPath = npath
	if l.nvrtcMajor, l.nvrtcMinor, err = nvrtcVersion(); err != nil {
		return nil, err
	}
	if l.nvrtcMajor >= 13 && l.major*10+l.minor < 75 {
		return nil, fmt.Errorf("%s has compute capability %d.%d; NVRTC %d.%d compiles for 7.5 and newer only", l.name, l.major, l.minor, l.nvrtcMajor, l.nvrtcMinor)
	}
	return l, nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// verString formats a cuDriverGetVersion number (12040) as "12.4".
func verString(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

func probe() backends.Probe {
	l, err := load()
	if err != nil {
		return backends.Probe{Reason: err.Error()}
	}
	prec, perr := precision(backends.Options{})
	if perr != nil {
		return backends.Probe{Reason: perr.Error()}
	}
	gib := float64(l.mem) / (1 << 30)
	return backends.Probe{
		Available: true,
		Level:     fmt.Sprintf("sm_%d%d %s", l.major, l.minor, prec),
		Device: fmt.Sprintf("%s, %.0f GiB, compute %d.%d, %d SMs, driver %s, cuBLAS %s, NVRTC %d.%d",
			l.name, gib, l.major, l.minor, l.sms, verString(l.driverVer), l.cublasVer, l.nvrtcMajor, l.nvrtcMinor),
		Threads: 1,
		// cuBLAS's bf16 GEMMs run on the tensor cores of every GPU the backend accepts.
		BF16:       "tensor cores",
		Int8Reason: "int8 runs on the CPU backend only",
	}
}

// device is the process-wide GPU state: the primary context and zoo's kernel module.
type device struct {
	l     *libs
	ctx   cuContext
	fns   map[string]cuFunction
	image string // "cubin (cached)", "ptx", ... for messages
}

var (
	devOnce sync.Once
	dev     *device
	devErr  error
)

// getDevice retains the primary context and loads the kernels, once per process.
func getDevice() (*device, error) {
	devOnce.Do(func() { dev, devErr = openDevice() })
	return dev, devErr
}

func openDevice() (*device, error) {
	l, err := load()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := cuPrimaryCtx(l.dev)
	if err != nil {
		return nil, err
	}
	if err := cuSetCurrent(ctx); err != nil {
		return nil, err
	}
	d := &device{l: l, ctx: ctx, fns: map[string]cuFunction{}}
	mod, err := d.loadKernels()
	if err != nil {
		return nil, err
	}
	for _, name := range kernelNames {
		f, err := cuFunc(mod, name)
		if err != nil {
			return nil, err
		}
		d.fns[name] = f
	}
	return d, nil
}

// loadKernels compiles kernels.cu for this device with NVRTC (CUBIN when NVRTC can emit it,
// so the driver need not JIT PTX; PTX otherwise), caching the image on disk.
func (d *device) loadKernels() (cuModule, error) {
	l := d.l
	cubin := nvrtcHasCubin()
	arch := fmt.Sprintf("compute_%d%d", l.major, l.minor)
	ext := "ptx"
	if cubin {
		arch = fmt.Sprintf("sm_%d%d", l.major, l.minor)
		ext = "cubin"
	}
	nv := fmt.Sprintf("%d.%d", l.nvrtcMajor, l.nvrtcMinor)
	path := cacheFile(arch, nv, ext)
	if img := readCache(path); img != nil {
		if m, err := cuLoadModule(img); err == nil {
			d.image = ext + " (cached)"
			return m, nil
		}
	}
	img, log, err := nvrtcCompile(kernelSource, "kernels.cu", nvrtcOptions(arch), cubin)
	if err != nil {
		return nil, fmt.Errorf("compile kernels.cu for %s with NVRTC %s: %w\n%s", arch, nv, err, strings.TrimSpace(log))
	}
	m, err := cuLoadModule(img)
	if err != nil {
		return nil, fmt.Errorf("load kernels compiled for %s: %w", arch, err)
	}
	writeCache(path, img)
	d.image = ext
	return m, nil
}

// nvrtcOptions are the options kernels.cu is compiled with for arch ("sm_90" for a CUBIN,
// "compute_90" for PTX).
func nvrtcOptions(arch string) []string {
	return []string{"--gpu-architecture=" + arch, "--std=c++17", "-default-device"}
}

// with runs f on a locked OS thread with the device context current (driver-API contexts
// are per thread).
func (d *device) with(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cuSetCurrent(d.ctx); err != nil {
		return err
	}
	return f()
}
