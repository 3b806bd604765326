package cuda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"os"
	"path/filepath"
)

// kernelSource is the CUDA C of zoo's kernels, compiled with NVRTC at first use.
//
//go:embed kernels.cu
var kernelSource string

// kernelNames are the entry points looked up after loading the module.
var kernelNames = []string{
	"zoo_to_bf16", "zoo_unary", "zoo_unary4", "zoo_binary", "zoo_binary_rows", "zoo_layernorm_warp", "zoo_where", "zoo_copy", "zoo_fill", "zoo_gather",
	"zoo_softmax", "zoo_layernorm", "zoo_reduce", "zoo_attention", "zoo_attention_t32", "zoo_attention_t64",
	"zoo_attention_bf16_d32", "zoo_attention_bf16_d64",
}

// cacheFile returns where the compiled module for (arch, NVRTC version, format) is cached:
// os.UserCacheDir()/zoo/cuda/kernels-<hash>.<ext>, or "" when there is no cache directory.
func cacheFile(arch, nvrtc, ext string) string {
	dir, err := os.UserCacheDir()
	if err != nil || dir == "" {
		return ""
	}
	h := sha256.Sum256([]byte(kernelSource + "\x00" + arch + "\x00" + nvrtc + "\x00" + ext))
	return filepath.Join(dir, "zoo", "cuda", "kernels-"+hex.EncodeToString(h[:8])+"."+ext)
}

// readCache returns the cached module image, or nil.
func readCache(path string) []byte {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return nil
	}
	return b
}

// writeCache stores a module image atomically; failures only cost a recompile later.
func writeCache(path string, img []byte) {
	if path == "" {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kernels-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(img)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}
