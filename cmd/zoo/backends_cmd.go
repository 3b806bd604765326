package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
)

func backendsCommand() *cli.Command {
	return &cli.Command{
		Name:  "backends",
		Usage: "list the backends, whether each can run on this machine, and which one is chosen",
		Description: "BF16 names the path --precision bf16 runs on (e.g. avx512-bf16), or says none and why (the CPU lacks\n" +
			"AVX512-BF16, or ZOO_CPU chose a lower kernel level); --json: bf16 (\"\" when none) and bf16_reason." +
			examples("zoo backends", "zoo backends --json", "ZOO_BACKEND=cuda zoo backends"),
		Flags:  []cli.Flag{flagBackend, flagJSON},
		Action: backendsAction,
	}
}

type backendRow struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	Level     string `json:"kernel_level,omitempty"`
	Device    string `json:"device,omitempty"`
	Threads   int    `json:"threads,omitempty"`
	// BF16 is the backend's bf16 matrix-product path, "" when it has none here; BF16Reason
	// then says why (never "" then). Both are always present, so that scripts can test them.
	BF16       string `json:"bf16"`
	BF16Reason string `json:"bf16_reason"`
	Chosen     bool   `json:"chosen"`
	Why        string `json:"why_chosen,omitempty"`
}

func backendsAction(c *cli.Context) error {
	choice, selErr := backends.Select(c.String(flagBackend.Name))
	var rows []backendRow
	for _, b := range backends.All() {
		p := b.Probe()
		row := backendRow{Name: b.Name(), Available: p.Available, Reason: p.Reason, Level: p.Level, Device: p.Device, Threads: p.Threads,
			BF16: p.BF16, BF16Reason: p.BF16Reason}
		if row.BF16 == "" && row.BF16Reason == "" {
			row.BF16Reason = "the backend names no bf16 path"
			if !p.Available {
				row.BF16Reason = "the backend is unavailable here"
			}
		}
		if selErr == nil && choice.Backend.Name() == b.Name() {
			row.Chosen, row.Why = true, choice.Why
		}
		rows = append(rows, row)
	}
	if c.Bool(flagJSON.Name) {
		if err := format.WriteJSON(c.App.Writer, rows); err != nil {
			return err
		}
		return badInput(selErr)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	// BF16 is the last column: its reasons are long, and the others stay aligned before it.
	fmt.Fprintln(tw, "BACKEND\tSTATUS\tLEVEL\tTHREADS\tDEVICE\tBF16")
	for _, r := range rows {
		status := "available"
		if !r.Available {
			status = "unavailable: " + r.Reason
		}
		if r.Chosen {
			status += " (chosen)"
		}
		threads := "-"
		if r.Threads > 0 {
			threads = fmt.Sprint(r.Threads)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, status, r.Level, threads, r.Device, bf16Cell(r))
	}
	tw.Flush()
	if selErr != nil {
		return badInput(selErr)
	}
	fmt.Fprintf(c.App.Writer, "\nchosen: %s — %s\n", choice.Backend.Name(), choice.Why)
	return nil
}

// bf16Cell is the BF16 column: the path, "none (reason)", or "-" for a backend that cannot
// run here at all (its status says why).
func bf16Cell(r backendRow) string {
	switch {
	case r.BF16 != "":
		return r.BF16
	case !r.Available:
		return "-"
	}
	return "none (" + r.BF16Reason + ")"
}
