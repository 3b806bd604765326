package variant

import (
	"strings"
	"testing"
)

func TestTrainingKey(t *testing.T) {
	d := Description{Name: "v", Params: []Param{{Name: "dropout", Kind: KindFloat, Default: 0.1}}}
	if _, err := Resolve(d, map[string]any{TrainingKey: "true"}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("a user layer set %s: err %v, want it refused as reserved", TrainingKey, err)
	}
	cfg, err := Resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	tr := WithTraining(cfg)
	if cfg.Training() || !tr.Training() || tr.Float("dropout") != 0.1 {
		t.Errorf("WithTraining: %v → %v", cfg, tr)
	}
	// Over the plugin wire: the key comes off before Resolve and goes back after.
	rest, training := SplitTraining(map[string]any(tr))
	if !training || len(rest) != 1 {
		t.Errorf("SplitTraining(%v) = %v, %v", tr, rest, training)
	}
	if _, ok := tr[TrainingKey]; !ok {
		t.Error("SplitTraining changed its argument")
	}
	if _, training := SplitTraining(map[string]any(cfg)); training {
		t.Error("an inference config reads as training")
	}
	if !IsDropoutInput(DropoutInput("layers.0.ffn")) || IsDropoutInput(InputTokens) {
		t.Error("IsDropoutInput does not recognise DropoutInput's names")
	}
}
