package env

import (
	"fmt"
	"io"
	"strings"
)

// headings introduce each scope's part of the tables.
var headings = map[Scope]string{
	User:     "Read by zoo (checked at start-up: a bad value exits 2, an unknown ZOO_* name gets a warning):",
	Internal: "Set by zoo for the plugin processes it starts:",
	Test:     "Tests and benchmarks only (zoo itself ignores them):",
}

// WriteText writes the table as `zoo help environment` prints it.
func WriteText(w io.Writer) error {
	var b strings.Builder
	scope := Scope(-1)
	for _, v := range All() {
		if v.Scope != scope {
			if scope != -1 {
				b.WriteString("\n")
			}
			scope = v.Scope
			b.WriteString(headings[scope] + "\n\n")
		}
		fmt.Fprintf(&b, "  %s=%s\n      %s\n      Default: %s.\n", v.Name, v.Syntax, v.Doc, v.Default)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Markdown returns the table as the README's environment section holds it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| Variable | Value | Default | What it does |\n|---|---|---|---|\n")
	for _, v := range All() {
		doc := v.Doc
		if v.Scope != User {
			doc = "*(" + v.Scope.String() + ")* " + doc
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", v.Name, mdEscape(v.Syntax), mdEscape(v.Default), mdEscape(doc))
	}
	return b.String()
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// ManSection returns the variables zoo reads as the markdown of a man page's ENVIRONMENT
// section (urfave/cli renders man pages from markdown).
func ManSection() string {
	var b strings.Builder
	b.WriteString("# ENVIRONMENT\n\n")
	for _, v := range All() {
		if v.Scope == User {
			fmt.Fprintf(&b, "`%s=%s`\n: %s Default: %s.\n\n", v.Name, v.Syntax, v.Doc, v.Default)
		}
	}
	b.WriteString("`zoo help environment` also lists the variables zoo sets for its plugins and those of the tests.\n")
	return b.String()
}
