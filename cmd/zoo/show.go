package main

import (
	"cmp"
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/show"
)

func showCommand() *cli.Command {
	return &cli.Command{
		Name:        "show",
		Usage:       "show a variant's hyperparameters, parameters, and cost at given sequence lengths",
		ArgsUsage:   "NAME[.PRESET]",
		Description: examples("zoo show vanilla", "zoo show linformer.tiny --seq 64,128", "zoo show vanilla --set d_model=256 --json"),
		Flags: append(modelFlags(), flagJSON, flagFeed,
			&cli.StringFlag{Name: "seq", Value: show.DefaultSeq, Usage: "sequence lengths `N,N,...` at which to count FLOPs and memory (batch 1)"},
		),
		Action: showAction,
	}
}

func showAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("show: want one model name (see `zoo list`), got %d arguments", c.NArg())
	}
	seqs, err := format.ParseCounts("seq", c.String("seq"))
	if err != nil {
		return badInput(err)
	}
	m, err := loadModel(c.Context, c, c.Args().First())
	if err != nil {
		return err
	}
	res := show.Describe(m.Name(), m.Description(), m.Config(), m.Seed(), m.Graph())
	res.Weights = m.Weights()
	plan, planErr := planFeeds(m.Graph(), c.StringSlice(flagFeed.Name))
	if planErr != nil && c.IsSet(flagFeed.Name) {
		return badInput(planErr)
	}
	var shapes func(n int) map[string][]int
	maxLen := m.Config().Int(m.Description().Caps.MaxLenParam)
	if plan != nil {
		res.TextInputs, shapes = plan, func(n int) map[string][]int { return plan.Shapes(1, n) }
		res.Feeds = &show.Feeds{Lines: plan.Describe(), MaxLen: plan.MaxLen, MaxLenFrom: plan.MaxLenFrom, VocabRows: plan.VocabRows, VocabFrom: plan.VocabFrom}
		if m.Description().Caps.MaxLenParam == "" {
			maxLen = cmp.Or(plan.Seq, plan.MaxLen) // a static length wins over the position table
		}
	}
	if planErr != nil {
		res.FeedsError = planErr.Error()
	}
	if !c.IsSet("seq") {
		seqs = show.ClampSeqs(c.App.ErrWriter, seqs, maxLen, m.Name())
	}
	if res.Costs, err = show.Costs(m.Name(), m.Graph(), seqs, maxLen, shapes, m.Config().Int("layers"), m.Config().Int("d_model")); err != nil {
		var le *show.LengthError
		if errors.As(err, &le) {
			return badInput(err)
		}
		return failed(err)
	}
	if c.Bool(flagJSON.Name) {
		return format.WriteJSON(c.App.Writer, res)
	}
	show.Render(c.App.Writer, res)
	return nil
}
