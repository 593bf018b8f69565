package tests

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/licensor-api/licensor/app/audit"
	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/tests/testdb"
)

// BenchmarkServer drives the whole server in process (no network), from
// parallel goroutines, on the paths retries and reads take, for profiling:
//
//	go test -run '^$' -bench Server -cpu 2 -cpuprofile cpu.out ./tests/
//	go tool pprof -top tests.test cpu.out
//
// It is no throughput figure for the docs: the benchmark program (bench/)
// measures the real server over HTTP.
func BenchmarkServer(b *testing.B) {
	for _, dialect := range []string{"sqlite", "mysql"} {
		b.Run(dialect, func(b *testing.B) {
			benchServer(b, testdb.New(b, dialect))
		})
	}
}

func benchServer(b *testing.B, db *testdb.DB) {
	cfg := testConfig("")
	cfg.Vendor = config.Vendor{Driver: "fake"}
	cfg.LogLevel = cmp.Or(os.Getenv("BENCH_LOG_LEVEL"), "info") // the access log is part of the cost
	app, err := console.Bootstrap(context.Background(), cfg, console.NewLogger(cfg, io.Discard), console.Overrides{DB: db.Gorm, Read: db.Read})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = app.Close() })
	e := app.Server()
	issued, err := app.Auth.Issue(context.Background(), audit.Console(), auth.IssueInput{Consumer: "acme", Abilities: []string{auth.LicensesRead, auth.LicensesWrite}})
	if err != nil {
		b.Fatal(err)
	}
	bearer := "Bearer " + issued.Secret
	serve := func(method, path, body, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", bearer)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	first := serve(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"acme.test"}`, "bench-replay")
	if first.Code != http.StatusCreated {
		b.Fatalf("create: %d %s", first.Code, first.Body)
	}
	var created struct {
		Data struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal(first.Body.Bytes(), &created); err != nil {
		b.Fatal(err)
	}
	run := func(name string, want int, req func(i int64) *httptest.ResponseRecorder) {
		var n atomic.Int64 // across the runs of one case, so each create is new
		b.Run(name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if rec := req(n.Add(1)); rec.Code != want {
						b.Errorf("%s: %d %s", name, rec.Code, rec.Body)
						return
					}
				}
			})
		})
	}
	run("healthz", http.StatusOK, func(int64) *httptest.ResponseRecorder {
		return serve(http.MethodGet, "/healthz", "", "")
	})
	run("replay", http.StatusCreated, func(int64) *httptest.ResponseRecorder {
		return serve(http.MethodPost, "/api/licenses", `{"name":"Acme","domain":"acme.test"}`, "bench-replay")
	})
	run("show", http.StatusOK, func(int64) *httptest.ResponseRecorder {
		return serve(http.MethodGet, "/api/licenses/"+created.Data.ID, "", "")
	})
	run("create-keyed", http.StatusCreated, func(i int64) *httptest.ResponseRecorder {
		return serve(http.MethodPost, "/api/licenses", fmt.Sprintf(`{"name":"K","domain":"k%d.test"}`, i), fmt.Sprintf("k-%d", i))
	})
	run("create-keyless", http.StatusCreated, func(i int64) *httptest.ResponseRecorder {
		return serve(http.MethodPost, "/api/licenses", fmt.Sprintf(`{"name":"U","domain":"u%d.test"}`, i), "")
	})
}
