package trainout

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/train"
)

// TestResumeKeepsLines: a resumed run keeps the log's lines up to its checkpoint's step,
// drops later ones and a torn last line, and appends its own.
func TestResumeKeepsLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	log, kept, err := Open(path, 0)
	if err != nil || kept != nil {
		t.Fatal(kept, err)
	}
	rec := &Recorder{Log: log}
	for _, s := range []train.Step{{Step: 0, Eval: true, EvalLoss: 5, EvalBitsPerByte: 7}, {Step: 1, Loss: 4}, {Step: 2, Loss: 3}, {Step: 3, Loss: 2}} {
		if err := rec.Record(s); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":4,"lo`) // a kill mid-line
	f.Close()
	log, kept, err = Open(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 3 || !kept[0].IsEval() || *kept[0].EvalBitsPB != 7 || *kept[2].Loss != 3 {
		t.Fatalf("kept %+v", kept)
	}
	if err := log.Write(LineOf(train.Step{Step: 3, Loss: 2.5})); err != nil {
		t.Fatal(err)
	}
	log.Close()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 || lines[3] != `{"step":3,"loss":2.5,"lr":0,"grad_norm":0,"tokens_per_s":0}` {
		t.Errorf("log after resume:\n%s", data)
	}
}

func TestPlot(t *testing.T) {
	var lines []Line
	for k := range 40 {
		lines = append(lines, LineOf(train.Step{Step: k + 1, Loss: 5 - float64(k)/20 + float64(k%3)/10}))
		if k%10 == 0 {
			lines = append(lines, LineOf(train.Step{Step: k, Eval: true, EvalLoss: 5 - float64(k)/30, EvalBitsPerByte: 7 - float64(k)/25}))
		}
	}
	var b bytes.Buffer
	if err := Plot(&b, lines, "t"); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil || img.Bounds().Dx() != 1600 {
		t.Errorf("plot: %v, %v", err, img.Bounds())
	}
	if err := Plot(&b, nil, "t"); err == nil {
		t.Error("no lines: no error")
	}
}
