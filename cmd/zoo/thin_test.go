package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestThinShell holds package main to what the library issue asks of it: at most 5,000
// non-test lines; flags read only in Actions (no other function takes *cli.Context: the
// Actions a command names, the mode Actions they hand over to, named ...Action, and urfave's
// OnUsageError callback); no Action over 80 lines. Logic belongs in the library or in
// cmd/zoo/internal.
func TestThinShell(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	lines := 0
	callbacks := map[string]bool{}
	var funcs []*ast.FuncDecl
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(data), "\n")
		f, err := parser.ParseFile(fset, name, data, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && (k.Name == "Action" || k.Name == "OnUsageError") {
					if v, ok := n.Value.(*ast.Ident); ok {
						callbacks[v.Name] = true
					}
				}
			case *ast.FuncDecl:
				funcs = append(funcs, n)
			}
			return true
		})
	}
	if lines > 5000 {
		t.Errorf("package main holds %d non-test lines, more than 5,000: move logic to the library or cmd/zoo/internal", lines)
	}
	for _, fd := range funcs {
		name := fd.Name.Name
		action := callbacks[name] || strings.HasSuffix(name, "Action")
		if takesCLIContext(fd) && !action {
			t.Errorf("%s: %s takes *cli.Context but is no Action: pass it the values it needs", fset.Position(fd.Pos()), name)
		}
		if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; action && n > 80 {
			t.Errorf("%s: Action %s is %d lines, more than 80", fset.Position(fd.Pos()), name, n)
		}
	}
}

func takesCLIContext(fd *ast.FuncDecl) bool {
	for _, p := range fd.Type.Params.List {
		if star, ok := p.Type.(*ast.StarExpr); ok {
			if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Context" {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "cli" {
					return true
				}
			}
		}
	}
	return false
}
