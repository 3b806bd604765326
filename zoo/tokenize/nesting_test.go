package tokenize

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/internal/hostile"
)

// TestNestedSequences: Sequence normalizers, pre-tokenizers and post-processors nest at most
// maxNesting deep. Every level parsed its whole subtree again, so a 180 KB file nested 4,990
// deep took 700 MB and 8 s to load; now it is refused, allocating about its own size.
func TestNestedSequences(t *testing.T) {
	for _, part := range []string{"normalizer", "pre_tokenizer", "post_processor"} {
		ok, err := LoadBytes("ok.json", hostile.NestedTokenizerJSON(part, maxNesting))
		if err != nil {
			t.Fatalf("%s nested %d deep: %v", part, maxNesting, err)
		}
		ids, _, err := ok.Encode("a A")
		if err != nil || len(ids) == 0 {
			t.Fatalf("%s: %v %v", part, ids, err)
		}
		_, err = LoadBytes("deep.json", hostile.NestedTokenizerJSON(part, maxNesting+1))
		want := "deep.json: " + part + ": Sequence nested more than 16 deep"
		if err == nil || !errors.Is(err, ErrFormat) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s nested %d deep: %v, want an ErrFormat ending %q", part, maxNesting+1, err, want)
		}
		deep := hostile.NestedTokenizerJSON(part, 4990)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := LoadBytes("deep.json", deep); err == nil {
			t.Errorf("%s nested 4990 deep loads", part)
		}
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100*uint64(len(deep)) { // was 4,000 times
			t.Errorf("%s nested 4990 deep: loading a %d-byte file allocated %d MB", part, len(deep), alloc>>20)
		}
	}
	// Nested sequences are flattened: the parts are those of one Sequence.
	tk, err := LoadBytes("ok.json", hostile.NestedTokenizerJSON("normalizer", 5))
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := tk.(*pipeline).norm.(normSeq); !ok || len(q) != 1 {
		t.Errorf("normalizer %#v, want one flat Sequence", tk.(*pipeline).norm)
	}
}
