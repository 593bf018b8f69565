package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/operations"
)

// productionFiles parses every non-test Go file of the module's production
// packages (main, app/, config/, database/, client/), by path.
func productionFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, root := range []string{"../main.go", "../app", "../config", "../database", "../client"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files[path] = f
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// No request data rides in Echo's context between packages: c.Set and
// c.Get carry only the principal, app/http's own (and
// routes.go reads the methods Echo's router found for a path). An
// operation's input, its outcome and the guard's decision for the log line
// travel as arguments and return values.
func TestNoRequestDataInTheEchoContext(t *testing.T) {
	allowed := []string{"ctxPrincipal"}
	for path, f := range productionFiles(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Set" && sel.Sel.Name != "Get") || len(call.Args) == 0 {
				return true
			}
			if recv, ok := sel.X.(*ast.Ident); !ok || recv.Name != "c" {
				return true // echo.Context is c throughout app/
			}
			if id, ok := call.Args[0].(*ast.Ident); ok && slices.Contains(allowed, id.Name) && strings.HasPrefix(path, "../app/http/") {
				return true
			}
			// Echo's own routing result (the methods a path allows, which its
			// router leaves there for OPTIONS and 405), read where the
			// routes are: no data of ours.
			if key, ok := call.Args[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "Get" && key.Sel.Name == "ContextKeyHeaderAllow" &&
				path == "../app/http/routes.go" {
				return true
			}
			t.Errorf("%s: c.%s(…) carries data in Echo's context; pass it as a value", path, sel.Sel.Name)
			return true
		})
	}
}

// Each operation's name is written once in the production code: in its
// declaration (app/operations). The routes, the reconciler and the metrics
// take it from the value.
func TestOperationNamesAreWrittenOnce(t *testing.T) {
	count := map[string][]string{}
	ops, err := idempotency.NewOperations(operations.New(nil).List()...)
	if err != nil {
		t.Fatal(err)
	}
	names := ops.Names()
	for _, name := range names {
		count[name] = []string{}
	}
	for path, f := range productionFiles(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil {
				if seen, ok := count[s]; ok && s != "" {
					count[s] = append(seen, path)
				}
			}
			return true
		})
	}
	for _, name := range names {
		if where := count[name]; len(where) != 1 || !strings.HasPrefix(where[0], "../app/operations/") {
			t.Errorf("operation %q is written at %v; want once, in app/operations", name, where)
		}
	}
}
