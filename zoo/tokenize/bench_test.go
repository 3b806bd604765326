package tokenize

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkEncode measures encoding English text (examples/text.txt repeated to 1 MiB) on one
// goroutine; the MB/s column is the number the 5 MB/s target is about.
func BenchmarkEncode(b *testing.B) {
	raw, err := os.ReadFile("../../examples/text.txt")
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat(string(raw), (1<<20)/len(raw)+1)[:1<<20]
	// Cut at a space so the last word is whole.
	text = text[:strings.LastIndexByte(text, ' ')]
	for _, f := range []string{"minilm.tokenizer.json", "bytelevel-bpe.tokenizer.json", "spm-unigram.tokenizer.json", "spm-unigram.model", "spm-bpe.model"} {
		tk, err := Load(filepath.Join("testdata", f))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(f, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			cpu0 := cpuSeconds()
			for b.Loop() {
				if _, _, err := tk.Encode(text); err != nil {
					b.Fatal(err)
				}
			}
			// On a shared machine wall time overstates the cost; the process's CPU time (GC
			// included) is the cost of tokenizing on one core.
			if cpu := cpuSeconds() - cpu0; cpu > 0 {
				b.ReportMetric(float64(len(text))*float64(b.N)/cpu/1e6, "cpu-MB/s")
			}
		})
	}
}

// cpuSeconds is the user and system CPU time of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
