package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/backendlist"
	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
)

func backendsCommand() *cli.Command {
	return &cli.Command{
		Name:  "backends",
		Usage: "list the backends, whether each can run on this machine, and which one is chosen",
		Description: "BF16 names the path --precision bf16 runs on (e.g. avx512-bf16), or says none and why (the CPU lacks\n" +
			"AVX512-BF16, or ZOO_CPU chose a lower kernel level); --json: bf16 (\"\" when none) and bf16_reason. INT8 names the\n" +
			"path --precision int8 runs on (amx-int8, vnni512, avx-vnni, avx2, or none: no int8 kernels, products in pure Go), with what\n" +
			"keeps a better one off; none where the backend has no int8 path (cuda); --json: int8 (\"\" for cuda) and int8_reason." +
			examples("zoo backends", "zoo backends --json", "ZOO_BACKEND=cuda zoo backends"),
		Flags:  []cli.Flag{flagBackend, flagJSON},
		Action: backendsAction,
	}
}

func backendsAction(c *cli.Context) error {
	choice, selErr := backends.Select(c.String(flagBackend.Name))
	chosen := &choice
	if selErr != nil {
		chosen = nil
	}
	rows := backendlist.Rows(backends.All(), chosen)
	if c.Bool(flagJSON.Name) {
		if err := format.WriteJSON(c.App.Writer, rows); err != nil {
			return err
		}
		return badInput(selErr)
	}
	backendlist.Render(c.App.Writer, rows)
	if selErr != nil {
		return badInput(selErr)
	}
	fmt.Fprintf(c.App.Writer, "\nchosen: %s — %s\n", choice.Backend.Name(), choice.Why)
	return nil
}
