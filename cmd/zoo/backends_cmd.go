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
		Name:        "backends",
		Usage:       "list the backends, whether each can run on this machine, and which one is chosen",
		Description: examples("zoo backends", "zoo backends --json", "ZOO_BACKEND=cuda zoo backends"),
		Flags:       []cli.Flag{flagBackend, flagJSON},
		Action:      backendsAction,
	}
}

type backendRow struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	Level     string `json:"kernel_level,omitempty"`
	Device    string `json:"device,omitempty"`
	Threads   int    `json:"threads,omitempty"`
	Chosen    bool   `json:"chosen"`
	Why       string `json:"why_chosen,omitempty"`
}

func backendsAction(c *cli.Context) error {
	choice, selErr := backends.Select(c.String(flagBackend.Name))
	var rows []backendRow
	for _, b := range backends.All() {
		p := b.Probe()
		row := backendRow{Name: b.Name(), Available: p.Available, Reason: p.Reason, Level: p.Level, Device: p.Device, Threads: p.Threads}
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
	fmt.Fprintln(tw, "BACKEND\tSTATUS\tLEVEL\tTHREADS\tDEVICE")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, status, r.Level, threads, r.Device)
	}
	tw.Flush()
	if selErr != nil {
		return badInput(selErr)
	}
	fmt.Fprintf(c.App.Writer, "\nchosen: %s — %s\n", choice.Backend.Name(), choice.Why)
	return nil
}
