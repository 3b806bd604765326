package backendlist

import (
	"bytes"
	"slices"
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
		if r.Int8 == "" && r.Int8Reason == "" {
			t.Errorf("%s: neither an int8 path nor a reason", r.Name)
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
		if r.Name == "cpu" && !slices.Contains([]string{"amx-int8", "vnni512", "avx-vnni", "avx2", "none"}, r.Int8) {
			t.Errorf("cpu: int8 %q, want amx-int8, vnni512, avx-vnni, avx2 or none", r.Int8)
		}
		want := 8 // weights' bits: 7 on the avx2 path, none without a path
		switch r.Int8 {
		case "":
			want = 0
		case "avx2":
			want = 7
		}
		if r.Int8WeightBits != want {
			t.Errorf("%s: int8 %q with %d-bit weights, want %d", r.Name, r.Int8, r.Int8WeightBits, want)
		}
		if r.Chosen {
			t.Errorf("%s chosen without a choice", r.Name)
		}
	}
}

func TestRender(t *testing.T) {
	var b bytes.Buffer
	Render(&b, []Row{
		{Name: "cpu", Available: true, Level: "avx2", Threads: 8, BF16Reason: "no AVX512-BF16", Int8: "avx2", Int8WeightBits: 7, Chosen: true},
		{Name: "cuda", Reason: "no GPU", BF16Reason: "the backend is unavailable here", Int8Reason: "the backend is unavailable here"},
		{Name: "gpu", Available: true, BF16: "tensor-cores", Int8Reason: "the backend names no int8 path"},
		{Name: "old", Available: true, BF16Reason: "no AVX512-BF16", Int8: "none", Int8Reason: "products in pure Go: the CPU lacks AVX2"},
	})
	out := b.String()
	for _, want := range []string{"available (chosen)", "none (no AVX512-BF16)", "unavailable: no GPU", "cuda",
		"INT8", "none (the backend names no int8 path)", "none (products in pure Go: the CPU lacks AVX2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if f := strings.Fields(strings.Split(out, "\n")[2]); len(f) < 2 || f[len(f)-1] != "-" || f[len(f)-2] != "-" {
		line := strings.Split(out, "\n")[2]
		t.Errorf("an unavailable backend's BF16 and INT8 cells: %q", line)
	}
	if line := strings.Split(out, "\n")[1]; !strings.HasSuffix(strings.TrimSpace(line), "avx2 7-bit") {
		t.Errorf("the cpu's INT8 cell: %q", line)
	}
}
