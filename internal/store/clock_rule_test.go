package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestClock_ReadBeforeTheTransaction: no transaction reads the store's
// clock. On PostgreSQL the clock is a query on the pool (dbClock), so a
// transaction that reads it asks for a second connection while it holds
// its first and, often, a row lock. Forty writers waiting for that row
// each hold a connection of the pool's ten, and the holder waits for one
// of them: a stall until the clock's time-out (a retry racing releases
// did this for 55 s; a batch's cancels re-sent at once did it too). The
// rule: s.now(), s.nowTS() and s.Now() are never called inside a function
// literal given to inTx, inTxHooks or inTxAt, nor in a function that
// takes a *sql.Tx; read the time before, or let the statement read it
// (dialect.clockOr with clockArg).
func TestClock_ReadBeforeTheTransaction(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			var where string
			switch n := n.(type) {
			case *ast.FuncDecl:
				if takesTx(n.Type) && n.Body != nil {
					body, where = n.Body, "func "+n.Name.Name+" (takes a *sql.Tx)"
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "inTx") {
					for _, arg := range n.Args {
						if lit, ok := arg.(*ast.FuncLit); ok {
							body, where = lit.Body, "the function given to "+sel.Sel.Name
						}
					}
				}
			}
			if body == nil {
				return true
			}
			checked++
			ast.Inspect(body, func(m ast.Node) bool {
				call, ok := m.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "now", "nowTS", "Now":
					if recv, ok := sel.X.(*ast.Ident); ok && recv.Name == "time" {
						return true // time.Now: the local clock, no query (SQLite's own, or a log's)
					}
					t.Errorf("%s: %s reads the store's clock (%s) inside a transaction: read it before",
						fset.Position(call.Pos()), where, sel.Sel.Name)
				}
				return true
			})
			return true
		})
	}
	if checked < 20 {
		t.Fatalf("found only %d transaction bodies to check; the rule's search is broken", checked)
	}
}

// takesTx: the function has a parameter of type *sql.Tx.
func takesTx(ft *ast.FuncType) bool {
	for _, p := range ft.Params.List {
		star, ok := p.Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Tx" {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "sql" {
				return true
			}
		}
	}
	return false
}
