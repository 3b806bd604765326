package train

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/zoo-dev/zoo/zoo/optim"
)

// ExtendRule is the rule for the learning rate of a run extended past the steps it was
// given, as the documentation of front ends states it.
const ExtendRule = "Extending a run (resuming it with more steps than it was given) keeps the learning rate of every step " +
	"up to the old last step and trains the added steps as a new cycle of the schedule: a linear warm-up from the " +
	"rate of the old last step (0 for linear and cosine, the peak for constant) back to the peak over max(warm-up, " +
	"10, a tenth of the added steps) steps (at most the added steps), then the schedule's decay to the new last " +
	"step, so the rate climbs back instead of jumping. Ending a run early (fewer steps) keeps the schedule it was given."

// Cycle is one cycle of a run's learning-rate schedule. A run has one, over all its steps
// (Config.Cycles nil); each extension past its last step (Checkpoint.Continue with more
// Steps) adds one over the added steps, following ExtendRule.
type Cycle struct {
	// Start is the step after which the cycle begins (0 for the first), End its last step.
	Start, End int
	// Warmup is the number of steps of its linear warm-up, which rises from From (0 for
	// the first cycle, the rate of step Start for a restart) to Config.LR.
	Warmup int
	From   float64
}

// cycles returns the run's cycles: Config.Cycles, or one over Steps with Warmup.
func (c Config) cycles() []Cycle {
	if len(c.Cycles) > 0 {
		return c.Cycles
	}
	return []Cycle{{Start: 0, End: c.Steps, Warmup: c.Warmup}}
}

// horizon is the last step the schedule is laid out to.
func (c Config) horizon() int {
	cy := c.cycles()
	return cy[len(cy)-1].End
}

// LearningRate returns the learning rate of step k (1-based, at most Config.Steps): in the
// cycle that holds k, warm-up from its From to LR over its Warmup steps, then LR (constant),
// LR·(End−k)/(End−Start−Warmup) (linear) or LR·½·(1+cos(π·(k−Start−Warmup)/(End−Start−Warmup)))
// (cosine). A run of one cycle gets torch's schedule (optim.Schedule) exactly.
func (c Config) LearningRate(k int) float64 {
	cycles := c.cycles()
	cy := cycles[0]
	for _, x := range cycles[1:] {
		if k > x.Start {
			cy = x
		}
	}
	j := k - cy.Start
	if j <= cy.Warmup && cy.From != 0 {
		return cy.From + (c.LR-cy.From)*float64(j)/float64(cy.Warmup)
	}
	return optim.Schedule{LR: c.LR, Warmup: cy.Warmup, Steps: cy.End - cy.Start, Kind: c.Schedule}.At(j)
}

// extended returns c continued to steps: a new cycle over the steps beyond c's horizon
// (ExtendRule), or c's horizon kept for a run that ends before it.
func (c Config) extended(steps int) Config {
	h := c.horizon()
	switch {
	case steps > h:
		added := steps - h
		w := min(added, max(c.Warmup, 10, (added+9)/10))
		cycles := append(append([]Cycle(nil), c.cycles()...), Cycle{Start: h, End: steps, Warmup: w, From: c.LearningRate(h)})
		c.Cycles = cycles
	case steps < h && len(c.Cycles) == 0:
		c.Cycles = c.cycles()
	}
	c.Steps = steps
	return c
}

// validateCycles checks Config.Cycles (when set): contiguous from step 0, each with a
// warm-up that fits it, Steps within the last.
func (c Config) validateCycles() error {
	if len(c.Cycles) == 0 {
		return nil
	}
	at := 0
	for i, cy := range c.Cycles {
		if cy.Start != at || cy.End <= cy.Start || cy.Warmup < 0 || cy.Warmup > cy.End-cy.Start || (i == 0 && (cy.From != 0 || cy.Warmup != c.Warmup)) {
			return inputErrf(optSchedule, "%s: cycle %d %s does not continue the cycles before it (take Config.Cycles from Checkpoint.Continue)", optSchedule, i+1, cy)
		}
		at = cy.End
	}
	if c.Steps > at {
		return inputErrf(optSteps, "%s %d is beyond the schedule's last cycle, which ends at step %d (take Config.Cycles from Checkpoint.Continue)", optSteps, c.Steps, at)
	}
	return nil
}

func (cy Cycle) String() string {
	return fmt.Sprintf("steps %d–%d, warm-up %d from %s", cy.Start+1, cy.End, cy.Warmup, strconv.FormatFloat(cy.From, 'g', -1, 64))
}

// cyclesString formats the restarts (the cycles after the first) for comparison.
func (c Config) cyclesString() string {
	var parts []string
	for _, cy := range c.cycles()[1:] {
		parts = append(parts, cy.String())
	}
	return strings.Join(parts, "; ")
}

// DescribeCycle says in words how cycle cy of c's schedule runs, for a front end's note
// ("steps 61–100: warm-up over 4 steps from lr 0 to 0.0001, then linear to 0 at step 100").
func (c Config) DescribeCycle(cy Cycle) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
	decay := map[string]string{optim.Linear: fmt.Sprintf("linear to 0 at step %d", cy.End),
		optim.Cosine: fmt.Sprintf("cosine to 0 at step %d", cy.End), optim.Constant: "constant"}[c.Schedule]
	return fmt.Sprintf("steps %d–%d: warm-up over %d steps from lr %s to %s, then %s", cy.Start+1, cy.End, cy.Warmup, f(cy.From), f(c.LR), decay)
}
