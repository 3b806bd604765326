package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// trainBar returns a step progress bar on w when w is a terminal, else nil. prefix starts its
// line ("" for zoo train, "compare clm vanilla.tiny: " for zoo compare).
func trainBar(w io.Writer, prefix string, steps, from int) *stepBar {
	f, ok := underlying(w).(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return newStepBar(w, prefix, steps, from)
}

// stepBarInterval is the least time between two redraws of a stepBar (a variable for tests).
var stepBarInterval = 100 * time.Millisecond

// stepBar is the progress line of a training loop: "step 3/15 loss 5.1234 … 20% |██    |".
// The step count is written once, in the description: the bar shows no counter of its own
// (it repeated the count, and disagreed with it whenever the bar redrew between setting the
// step and describing it). update sets both, then redraws: at most every stepBarInterval,
// and always for the last step.
type stepBar struct {
	bar    *progressbar.ProgressBar
	prefix string
	steps  int
	drawn  time.Time
}

func newStepBar(w io.Writer, prefix string, steps, from int) *stepBar {
	b := &stepBar{prefix: prefix, steps: steps}
	b.bar = progressbar.NewOptions(steps, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(b.describe(from, "")),
		progressbar.OptionSetPredictTime(false), progressbar.OptionFullWidth(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }), progressbar.OptionClearOnFinish())
	_ = b.bar.Set(from)
	b.drawn = time.Now()
	return b
}

func (b *stepBar) describe(step int, detail string) string {
	return strings.TrimSpace(fmt.Sprintf("%sstep %d/%d %s", b.prefix, step, b.steps, detail))
}

// update shows step (done of b.steps) and detail (loss, rate, ...) on the line.
func (b *stepBar) update(step int, detail string) {
	if step < b.steps && time.Since(b.drawn) < stepBarInterval {
		return
	}
	b.drawn = time.Now()
	// progressbar draws on each call, so the line is drawn with the new description and the
	// old step, then at once with both new.
	b.bar.Describe(b.describe(step, detail))
	_ = b.bar.Set(step)
}

// finish ends the line.
func (b *stepBar) finish() { _ = b.bar.Finish() }
