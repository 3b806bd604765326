// Package backendlist describes zoo's backends for `zoo backends`: whether each can run on
// this machine (and why not), its kernel level, threads and device, its bf16 and int8 paths
// (or why it has none), and which one is chosen and why; as a table or JSON.
package backendlist

import (
	"cmp"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/zoo-dev/zoo/backends"
)

// Row is one backend; --json prints the rows.
type Row struct {
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
	// Int8 is the backend's int8 path (the CPU's: "amx-int8", "vnni512", "avx-vnni", "avx2", or "none"
	// where it has no int8 kernels and --precision int8 runs in pure Go, which Int8Reason
	// then says), "" when the backend has no int8 path at all; Int8Reason says why, or beside
	// a path what keeps a better one off ("" on the best path). Both are always present.
	Int8       string `json:"int8"`
	Int8Reason string `json:"int8_reason"`
	// Int8WeightBits is the bits --precision int8 quantizes the linear layers' weights to
	// on that path: 8, or 7 on the CPU's avx2 path; 0 without an int8 path.
	Int8WeightBits int    `json:"int8_weight_bits"`
	Chosen         bool   `json:"chosen"`
	Why            string `json:"why_chosen,omitempty"`
}

// Rows probes every backend of all; chosen is the selected one (nil when the selection
// failed).
func Rows(all []backends.Backend, chosen *backends.Choice) []Row {
	var rows []Row
	for _, b := range all {
		p := b.Probe()
		row := Row{Name: b.Name(), Available: p.Available, Reason: p.Reason, Level: p.Level, Device: p.Device, Threads: p.Threads,
			BF16: p.BF16, BF16Reason: p.BF16Reason, Int8: p.Int8, Int8Reason: p.Int8Reason, Int8WeightBits: p.Int8WeightBits}
		if row.BF16 == "" && row.BF16Reason == "" {
			row.BF16Reason = "the backend names no bf16 path"
			if !p.Available {
				row.BF16Reason = "the backend is unavailable here"
			}
		}
		if row.Int8 == "generic" {
			// The CPU's pure-Go products: no int8 kernel path, though int8 still runs.
			row.Int8, row.Int8Reason = "none", "products in pure Go: "+cmp.Or(p.Int8Reason, "no int8 kernels here")
		}
		if row.Int8 == "" && row.Int8Reason == "" {
			row.Int8Reason = "the backend names no int8 path"
			if !p.Available {
				row.Int8Reason = "the backend is unavailable here"
			}
		}
		if chosen != nil && chosen.Backend.Name() == b.Name() {
			row.Chosen, row.Why = true, chosen.Why
		}
		rows = append(rows, row)
	}
	return rows
}

// Render prints the rows as a table.
func Render(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// BF16 and INT8 are the last columns: their reasons are long, and the others stay
	// aligned before them.
	fmt.Fprintln(tw, "BACKEND\tSTATUS\tLEVEL\tTHREADS\tDEVICE\tBF16\tINT8")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, status, r.Level, threads, r.Device, bf16Cell(r), int8Cell(r))
	}
	tw.Flush()
}

// bf16Cell is the BF16 column: the path, "none (reason)", or "-" for a backend that cannot
// run here at all (its status says why).
func bf16Cell(r Row) string {
	switch {
	case r.BF16 != "":
		return r.BF16
	case !r.Available:
		return "-"
	}
	return "none (" + r.BF16Reason + ")"
}

// int8Cell is the INT8 column: the path (its weights' bits where they are not 8; with what
// keeps a better one off, when something does), "none (reason)", or "-" for a backend that
// cannot run here at all.
func int8Cell(r Row) string {
	path := r.Int8
	if path != "" && r.Int8WeightBits != 0 && r.Int8WeightBits != 8 {
		path += fmt.Sprintf(" %d-bit", r.Int8WeightBits)
	}
	switch {
	case r.Int8 != "" && r.Int8Reason != "":
		return path + " (" + r.Int8Reason + ")"
	case r.Int8 != "":
		return path
	case !r.Available:
		return "-"
	}
	return "none (" + r.Int8Reason + ")"
}
