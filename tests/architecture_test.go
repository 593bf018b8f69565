package tests

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/licensor-api/licensor"

// rule forbids a package (and its tests' non-test code) some imports.
type rule struct {
	pkg       string
	forbidden []string // import path prefixes ("…$": that path alone); "third-party" forbids every non-stdlib import outside the module
}

// allowed are the imports a package's rule forbids but that it may make:
// the webhook signature scheme, stdlib only, which both the vendor's
// protocol and licensor's own webhooks use.
var allowed = map[string][]string{
	"app/vendorproto": {module + "/internal/hmacsig"},
	"client":          {module + "/internal/hmacsig"},
}

// helpers are the small packages of one job each that every package may
// import (the client too): their rules below keep them to the standard
// library.
var helpers = []string{module + "/internal/dbtime", module + "/internal/fault", module + "/internal/ptr", module + "/internal/wait"}

// sqlDrivers are the SQL drivers: only package database may import them.
var sqlDrivers = []string{"github.com/glebarez/sqlite", "github.com/glebarez/go-sqlite", "modernc.org/sqlite", "github.com/libtnb/sqlite",
	"github.com/go-sql-driver/mysql", "gorm.io/driver/", "github.com/ncruces/go-sqlite3"}

// rules are docs/architecture.md's "who may import whom".
var rules = []rule{
	{"app/licenses", []string{"github.com/labstack/echo", module + "/config", module + "/app/vendorclient", module + "/app/vendorproto", module + "/app/vendorsim",
		module + "/app/http", module + "/app/idempotency", module + "/app/auth", module + "/app/console"}},
	// The idempotency layer is generic and takes requests as plain values: no
	// web framework, no domain.
	{"app/idempotency", []string{"github.com/labstack/echo", module + "/app/licenses", module + "/app/http", module + "/app/auth", module + "/app/vendorclient", module + "/config", module + "/app/console"}},
	{"app/auth", []string{"github.com/labstack/echo", module + "/app/http", module + "/app/licenses", module + "/config", module + "/app/console"}},
	{"app/vendorclient", []string{"github.com/labstack/echo", "gorm.io", module + "/app/http", module + "/app/idempotency", module + "/app/auth", module + "/app/console"}},
	// app/http speaks no SQL: no GORM, no database package, no driver.
	{"app/http", []string{module + "/app/console", module + "/app/vendorclient", module + "/config", module + "/database", "gorm.io"}},
	// The API's JSON representations, shared by app/http and app/console: the types they present, nothing else.
	{"app/resource", []string{"third-party", module + "/app/http", module + "/app/console", module + "/app/vendorclient",
		module + "/app/metrics", module + "/app/ratelimit", module + "/app/crypt", module + "/config", module + "/database", module + "/client"}},
	{"app/vendorsim", []string{"third-party", module + "/app/vendorclient", module + "/app/licenses", module + "/app/idempotency", module + "/app/http",
		module + "/app/auth", module + "/app/console", module + "/config", module + "/database"}}, // a vendor of its own: vendorproto and stdlib; "third-party" covers gorm and echo
	// The vendor's protocol: stdlib, and internal/hmacsig (allowed), the signature scheme it shares with licensor's webhooks.
	{"app/vendorproto", []string{"third-party", module + "/"}},
	{"internal/hmacsig", []string{"third-party", module + "/"}},
	{"internal/dbtime", []string{"third-party", module + "/"}},
	{"internal/ptr", []string{"third-party", module + "/"}},
	{"internal/wait", []string{"third-party", module + "/"}},
	// The application's error: every package may import it, so it imports nothing.
	{"internal/fault", []string{"third-party", module + "/"}},
	// The guarded operations: declared on the domain, rendered through
	// resource; they know no server, no web framework and no wiring (GORM
	// only as the transaction of their last phase).
	// No import runs back up: app/http serves the operations, never the reverse.
	{"app/operations", []string{"github.com/labstack/echo", module + "/app/http", module + "/app/console", module + "/app/vendorclient", module + "/app/vendorsim",
		module + "/config", module + "/database"}},
	// Request bodies read and validated: no echo, no SQL.
	{"app/request", []string{"third-party", module + "/app/http", module + "/app/console", module + "/app/idempotency", module + "/database", module + "/config"}},
	// The audit trail: its rows and the actor, written in the transaction a
	// domain package hands it; it knows no domain, no server, no wiring.
	{"app/audit", []string{"github.com/labstack/echo", module + "/"}},
	// The consumer events: the outbox rows and the feed, written in the
	// transaction a domain package hands it; it knows no domain.
	{"app/events", []string{"github.com/labstack/echo", module + "/"}},
	// The webhook endpoints and deliveries: on the events, signing with the
	// one scheme; no server, no domain, no wiring.
	{"app/webhooks", []string{"github.com/labstack/echo", module + "/app/http", module + "/app/licenses", module + "/app/idempotency",
		module + "/app/auth", module + "/app/console", module + "/config", module + "/app/vendor"}},
	// The operator console's pages: the same services the API calls, no SQL
	// of its own, no wiring; errors go back to app/http's boundary, which it
	// does not import (app/http mounts it through its Pages interface).
	{"app/web", []string{module + "/app/http", module + "/app/console", module + "/app/vendorclient", module + "/app/vendorsim",
		module + "/config", module + "/database", "gorm.io"}},
	// The hourly activity counters: GORM and the dialect's statements
	// (database); they know no domain, no server, no wiring.
	{"app/activity", []string{"github.com/labstack/echo", module + "/app/", module + "/config"}},
	{"app/metrics", []string{"github.com/labstack/echo", "gorm.io", module + "/"}},
	{"app/ratelimit", []string{"github.com/labstack/echo", module + "/"}},
	{"config", []string{"third-party", module + "/"}},
	{"app/crypt", []string{"third-party", module + "/"}},
	// Consumers import the client: stdlib, internal/hmacsig (allowed), which verifies licensor's webhooks, and the helpers.
	{"client", []string{"third-party", module + "/"}},
	{"database", []string{module + "/app/"}},
	{"", []string{"third-party", module + "/app/auth", module + "/app/http", module + "/app/idempotency", module + "/app/licenses",
		module + "/app/vendorclient", module + "/app/vendorproto", module + "/app/vendorsim", module + "/app/metrics", module + "/config", module + "/database",
		module + "/client"}}, // main: app/console only
}

// listedPackage is what `go list -json` says of a package: its imports, and
// those of its test files (in the package, and in package x_test).
type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// listPackages runs `go list -json` over the module.
func listPackages(t *testing.T) []listedPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// relPath is a package's path relative to the module ("" for main).
func relPath(importPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
}

// packages lists the module's packages with their imports, keyed by path
// relative to the module ("" for main).
func packages(t *testing.T) map[string][]string {
	t.Helper()
	imports := map[string][]string{}
	for _, p := range listPackages(t) {
		imports[relPath(p.ImportPath)] = p.Imports
	}
	return imports
}

// No package under app/ imports a SQL driver: they speak GORM, and only
// package database knows which database is underneath.
func TestAppImportsNoSQLDriver(t *testing.T) {
	for pkg, imps := range packages(t) {
		if !strings.HasPrefix(pkg, "app/") {
			continue
		}
		for _, imp := range imps {
			for _, d := range sqlDrivers {
				if strings.HasPrefix(imp, d) {
					t.Errorf("%s imports the SQL driver %s; only package database may", pkg, imp)
				}
			}
		}
	}
}

// The root package is main.go alone: every command lives in app/console.
func TestRootHoldsOnlyMain(t *testing.T) {
	files, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || filepath.Base(files[0]) != "main.go" {
		t.Errorf("the root holds %v, want main.go alone", files)
	}
}

func TestImportRules(t *testing.T) {
	imports := packages(t)
	for _, r := range rules {
		pkgImports, ok := imports[r.pkg]
		if !ok {
			t.Errorf("package %s is missing from the tree", r.pkg)
			continue
		}
		for _, imp := range pkgImports {
			if slices.Contains(allowed[r.pkg], imp) || slices.Contains(helpers, imp) {
				continue
			}
			for _, f := range r.forbidden {
				bad := strings.HasPrefix(imp, f)
				if exact, ok := strings.CutSuffix(f, "$"); ok { // that package alone, not those below it
					bad = imp == exact
				}
				if f == "third-party" {
					bad = strings.Contains(strings.Split(imp, "/")[0], ".") && !strings.HasPrefix(imp, module)
				}
				if bad {
					t.Errorf("%s imports %s, which docs/architecture.md forbids", r.pkg, imp)
				}
			}
		}
	}
}

// The simulator is a vendor of its own, not a part of the application: only
// app/console imports it, for `licensor vendor-sim`. Tests may (the drivers'
// own test it against the simulator), and so may bench, a module of its own;
// packages lists no test's imports.
func TestSimulatorImportedOnlyByConsole(t *testing.T) {
	imports := packages(t)
	const sim = module + "/app/vendorsim"
	if _, ok := imports["app/vendorsim"]; !ok {
		t.Fatal("package app/vendorsim is missing from the tree")
	}
	if !slices.Contains(imports["app/console"], sim) {
		t.Error("app/console does not import app/vendorsim: who serves `licensor vendor-sim`?")
	}
	for pkg, imps := range imports {
		if pkg == "app/console" || pkg == "tests" || strings.HasPrefix(pkg, "tests/") {
			continue
		}
		if slices.Contains(imps, sim) {
			t.Errorf("%s imports app/vendorsim; only app/console may", pkg)
		}
	}
}

// go.mod pins a toolchain without the standard-library vulnerabilities of
// Go before 1.26.10 (one reachable here: MIME header parsing).
func TestToolchainIsPatched(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^toolchain go(\d+)\.(\d+)\.(\d+)$`).FindStringSubmatch(string(mod))
	if m == nil {
		t.Fatal("go.mod pins no toolchain")
	}
	v := [3]int{}
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	if v[0] == 1 && (v[1] < 26 || v[1] == 26 && v[2] < 10) {
		t.Errorf("toolchain go%d.%d.%d has known vulnerabilities; pin go1.26.10 or later", v[0], v[1], v[2])
	}
}

// TestWorkedExampleFiles keeps docs/architecture.md's worked example true:
// key rotation, a guarded vendor operation, lives in the eight non-test Go
// files the example lists, its surfaces in the four it lists besides, and
// the example names each of them. A ninth file that learns of the rotation
// fails here: the shape has grown a place to edit.
func TestWorkedExampleFiles(t *testing.T) {
	operation := []string{
		"app/vendorproto/wire.go", "app/licenses/vendor.go", "app/vendorclient/httpdriver.go", "app/vendorsim/routes.go",
		"app/licenses/rotate.go", "app/operations/rotate.go", "app/operations/operations.go", "app/http/routes.go",
	}
	surfaces := []string{"client/licenses.go", "app/console/licenses.go", "app/web/licenses.go", "app/web/routes.go"}
	marker := regexp.MustCompile(`RotateKey|RotateLicenseKey|rotate-key|Rotatable|RotatedSince|KeyRotated\(|ErrNotActive|license_not_active`)
	var got []string
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (rel == "bench" || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if marker.Match(src) {
			got = append(got, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(operation), surfaces...)))
	if !slices.Equal(got, want) {
		t.Errorf("the files that name the key rotation:\n got %v\nwant %v", got, want)
	}
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(doc), "## Worked example")
	example, _, _ = strings.Cut(example, "\n## ")
	for _, f := range want {
		if !strings.Contains(example, "`"+f+"`") {
			t.Errorf("docs/architecture.md's worked example does not name %s", f)
		}
	}
}
