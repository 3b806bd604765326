package backendlist

import (
	"bytes"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	_ "github.com/zoo-dev/zoo/backends/cpu" // registers the cpu backend
)

func TestRows(t *testing.T) {
	choice, err := backends.Select("cpu")
	if err != nil {
		t.Fatal(err)
	}
	rows := Rows(backends.All(), &choice)
	chosen := 0
	for _, r := range rows {
		if r.BF16 == "" && r.BF16Reason == "" {
			t.Errorf("%s: neither a bf16 path nor a reason", r.Name)
		}
		if r.Chosen {
			chosen++
			if r.Name != "cpu" || r.Why == "" {
				t.Errorf("chosen %+v", r)
			}
		}
	}
	if chosen != 1 {
		t.Errorf("%d rows chosen, want 1", chosen)
	}
	for _, r := range Rows(backends.All(), nil) {
		if r.Chosen {
			t.Errorf("%s chosen without a choice", r.Name)
		}
	}
}

func TestRender(t *testing.T) {
	var b bytes.Buffer
	Render(&b, []Row{
		{Name: "cpu", Available: true, Level: "avx2", Threads: 8, BF16Reason: "no AVX512-BF16", Chosen: true},
		{Name: "cuda", Reason: "no GPU", BF16Reason: "the backend is unavailable here"},
	})
	out := b.String()
	for _, want := range []string{"available (chosen)", "none (no AVX512-BF16)", "unavailable: no GPU", "cuda"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if line := strings.Split(out, "\n")[2]; !strings.HasSuffix(strings.TrimSpace(line), "-") {
		t.Errorf("an unavailable backend's BF16 cell: %q", line)
	}
}
