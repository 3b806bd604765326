package main

import (
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
		Description: examples("zoo show vanilla", "zoo show linformer.tiny --seq 64,128", "zoo show model.onnx --shape src=1xnx128 --json"),
		Flags: append(modelFlags(), flagJSON, flagFeed,
			&cli.StringFlag{Name: "seq", Value: show.DefaultSeq, Usage: "sequence lengths `N,N,...` at which to count FLOPs and memory (batch 1)"},
			&cli.StringSliceFlag{Name: "shape", Usage: show.ShapeUsage},
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
	maxLen, why := m.MaxLen(), "max_len"
	if plan != nil {
		res.TextInputs, shapes = plan, func(n int) map[string][]int { return plan.Shapes(1, n) }
		res.Feeds = &show.Feeds{Lines: plan.Describe(), MaxLen: plan.MaxLen, MaxLenWhy: plan.MaxLenWhy(), VocabRows: plan.VocabRows, VocabFrom: plan.VocabFrom}
		maxLen, why = plan.Limit(maxLen)
	}
	if planErr != nil {
		res.FeedsError = planErr.Error()
	}
	if shapes, err = show.Shapes(m.Graph(), shapes, c.StringSlice("shape")); err != nil {
		return badInput(err)
	}
	if !c.IsSet("seq") {
		seqs = show.ClampSeqs(c.App.ErrWriter, seqs, maxLen, why, m.Name())
	}
	if res.Costs, err = show.Costs(m.Name(), m.Graph(), seqs, maxLen, why, shapes, m.Config().Int("layers"), m.Config().Int("d_model")); err != nil {
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
