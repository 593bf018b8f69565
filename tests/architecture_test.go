package tests

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/licensor-api/licensor"

// rule forbids a package (and its tests' non-test code) some imports.
type rule struct {
	pkg       string
	forbidden []string // import path prefixes; "third-party" forbids every non-stdlib import outside the module
}

// rules are architecture.md's "who may import whom".
var rules = []rule{
	{"app/licenses", []string{"github.com/labstack/echo", module + "/config", module + "/app/vendorclient", module + "/app/http", module + "/app/idempotency", module + "/app/auth"}},
	{"app/idempotency", []string{module + "/app/licenses", module + "/app/http", module + "/app/auth", module + "/app/vendorclient", module + "/config"}},
	{"app/auth", []string{"github.com/labstack/echo", module + "/app/http", module + "/app/licenses", module + "/config"}},
	{"app/vendorclient", []string{"github.com/labstack/echo", "gorm.io", module + "/app/http", module + "/app/idempotency", module + "/app/auth"}},
	{"config", []string{"third-party", module + "/"}},
	{"client", []string{"third-party", module + "/"}},
	{"database", []string{module + "/app/"}},
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		imports[strings.TrimPrefix(p.ImportPath, module+"/")] = p.Imports
	}
	for _, r := range rules {
		pkgImports, ok := imports[r.pkg]
		if !ok {
			t.Errorf("package %s is missing from the tree", r.pkg)
			continue
		}
		for _, imp := range pkgImports {
			for _, f := range r.forbidden {
				bad := strings.HasPrefix(imp, f)
				if f == "third-party" {
					bad = strings.Contains(strings.Split(imp, "/")[0], ".") && !strings.HasPrefix(imp, module)
				}
				if bad {
					t.Errorf("%s imports %s, which architecture.md forbids", r.pkg, imp)
				}
			}
		}
	}
}
