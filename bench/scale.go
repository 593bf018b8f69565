package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// withDB opens the target the way licensor does, runs fn, and on SQLite
// checkpoints the WAL into the database file before closing, so the server
// that starts next reads a plain file. The server is stopped meanwhile:
// one writer per SQLite file.
func (b *bench) withDB(ctx context.Context, t *dbTarget, fn func(db *sql.DB) error) error {
	db, err := b.open(ctx, t)
	if err != nil {
		return err
	}
	err = fn(db)
	if err == nil && t.dialect == dialectSQLite {
		_, err = db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	}
	return errors.Join(err, db.Close())
}

// setupIdem makes a database with total idempotency records and a server
// on it.
func (b *bench) setupIdem(ctx context.Context, dialect, suffix string, total int, rep *dbReport) (*mainDB, error) {
	m := &mainDB{key: newKey()}
	var err error
	if m.t, err = b.newTarget(ctx, dialect, suffix); err != nil {
		return nil, err
	}
	if m.token, err = b.issueToken(ctx, m.t, "bench"); err != nil {
		return nil, err
	}
	if _, err := b.restart(ctx, m); err != nil {
		return m, err
	}
	domain := nextDomain()
	m.body = licenseBody("Bench", domain)
	if m.license, err = create(ctx, m.srv.url, m.token, m.key, domain); err != nil {
		return m, err
	}
	if err := b.stopProcess(m.srv); err != nil {
		return m, err
	}
	m.srv = nil
	start := time.Now()
	var n int
	err = b.withDB(ctx, m.t, func(db *sql.DB) error {
		cid, err := consumerID(ctx, db, "bench")
		if err != nil {
			return err
		}
		n, err = seedIdempotency(ctx, db, cid, m.key, total)
		return err
	})
	if err != nil {
		return m, fmt.Errorf("seed %d idempotency records: %w", total, err)
	}
	note := fmt.Sprintf("%s: seeded %d idempotency records (table total %d) in %v", dialect, n, total, time.Since(start).Round(time.Second))
	rep.notes = append(rep.notes, note)
	fmt.Fprintln(b.errOut, note)
	_, err = b.restart(ctx, m)
	return m, err
}

// runIdemScale compares the replay with 10 000 stored records against the
// replay with -big records, two databases served side by side.
func (b *bench) runIdemScale(ctx context.Context, dialect string, rep *dbReport) (err error) {
	var servers []*mainDB
	defer func() {
		for _, m := range servers {
			if m != nil && m.srv != nil {
				err = errors.Join(err, b.stopProcess(m.srv))
			}
		}
	}()
	small, err := b.setupIdem(ctx, dialect, "idem10k", 10_000, rep)
	servers = append(servers, small)
	if err != nil {
		return err
	}
	big, err := b.setupIdem(ctx, dialect, "idembig", b.opts.big, rep)
	servers = append(servers, big)
	if err != nil {
		return err
	}
	return b.compare(ctx, rep, cmpIdemScale,
		fixedCase("replay, 10000 records", b.opts.conns, small.current, small.replay),
		fixedCase(fmt.Sprintf("replay, %d records", b.opts.big), b.opts.conns, big.current, big.replay))
}

// listSizes are the listing consumers' license counts: 1 000, 100 000 and
// -big, those not above -big.
func (b *bench) listSizes() []int {
	var sizes []int
	for _, n := range []int{1_000, 100_000} {
		if n < b.opts.big {
			sizes = append(sizes, n)
		}
	}
	return append(sizes, b.opts.big)
}

// runList compares the offset list (with meta.total) against a cursor
// page, for consumers of each size, on one database.
func (b *bench) runList(ctx context.Context, dialect string, rep *dbReport) (err error) {
	m := &mainDB{}
	if m.t, err = b.newTarget(ctx, dialect, "list"); err != nil {
		return err
	}
	defer func() {
		if m.srv != nil {
			err = errors.Join(err, b.stopProcess(m.srv))
		}
	}()
	sizes := b.listSizes()
	tokens := make([]string, len(sizes))
	for i, n := range sizes {
		if tokens[i], err = b.issueToken(ctx, m.t, fmt.Sprintf("list-%d", n)); err != nil {
			return err
		}
	}
	if _, err := b.restart(ctx, m); err != nil {
		return err
	}
	templates := make([]string, len(sizes))
	for i := range sizes {
		c, err := create(ctx, m.srv.url, tokens[i], "", nextDomain())
		if err != nil {
			return err
		}
		templates[i] = c.ID
	}
	if err := b.stopProcess(m.srv); err != nil {
		return err
	}
	m.srv = nil
	start := time.Now()
	err = b.withDB(ctx, m.t, func(db *sql.DB) error {
		for i, n := range sizes {
			cid, err := consumerID(ctx, db, fmt.Sprintf("list-%d", n))
			if err != nil {
				return err
			}
			if _, err := seedLicenses(ctx, db, cid, templates[i], n); err != nil {
				return fmt.Errorf("seed %d licenses: %w", n, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	note := fmt.Sprintf("%s: seeded %d licenses for %d listing consumers in %v", dialect, total, len(sizes), time.Since(start).Round(time.Second))
	rep.notes = append(rep.notes, note)
	fmt.Fprintln(b.errOut, note)
	if _, err := b.restart(ctx, m); err != nil {
		return err
	}
	for i, n := range sizes {
		if err := checkTotal(ctx, m.srv.url, tokens[i], n); err != nil {
			return err
		}
	}
	for i, n := range sizes {
		tok := tokens[i]
		err := b.compare(ctx, rep, fmt.Sprintf("list, %d licenses", n),
			fixedCase("page=1 (meta.total)", b.opts.conns, m.current, func(url string) requestFunc { return get(url+"/api/licenses?page=1", tok) }),
			fixedCase("cursor= (first page)", b.opts.conns, m.current, func(url string) requestFunc { return get(url+"/api/licenses?cursor=", tok) }))
		if err != nil {
			return err
		}
	}
	return nil
}

// checkTotal checks that the server lists want licenses for the token's
// consumer (meta.total) and a full first page in cursor mode: the seeded
// rows are read as licensor's own.
func checkTotal(ctx context.Context, url, token string, want int) error {
	client := &http.Client{Timeout: time.Minute}
	var page struct {
		Data []json.RawMessage `json:"data"`
		Meta struct {
			Total   int `json:"total"`
			PerPage int `json:"per_page"`
		} `json:"meta"`
	}
	for _, q := range []string{"?page=1", "?cursor="} {
		req, err := apiRequest(ctx, http.MethodGet, url+"/api/licenses"+q, token, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/licenses%s: %d %v", q, resp.StatusCode, err)
		}
		if len(page.Data) != min(want, page.Meta.PerPage) || (q == "?page=1" && page.Meta.Total != want) {
			return fmt.Errorf("GET /api/licenses%s: %d licenses on the page, total %d; want %d in all", q, len(page.Data), page.Meta.Total, want)
		}
	}
	return nil
}
