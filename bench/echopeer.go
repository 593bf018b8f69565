package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
)

// echoPeerCommand is the hidden subcommand that runs the same-stack peer:
// the Fiber peer's job (a bearer row check, an idempotency middleware over
// the same storage, a handler answering a body of licensor's size) on
// licensor's own stack, Echo v4 on net/http, with the same database
// drivers. It tells what licensor's replay costs against the same job done
// plainly on the same stack, where the Fiber peer also measures fasthttp.
const echoPeerCommand = "echo-peer"

// runEchoPeer serves the same-stack peer until SIGINT or SIGTERM: GET
// /healthz with no middleware (its floor), POST /api/licenses behind the
// bearer check and the idempotency middleware.
func runEchoPeer(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("no arguments expected, got %v", args)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := openPeer(ctx)
	if err != nil {
		return err
	}
	defer s.db.Close()

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.POST("/api/licenses", echoPeerStore(s.bodySize), echoBearer(s.db, "licenses:write"), echoIdempotency(s.store, 24*time.Hour))
	srv := &http.Server{Addr: os.Getenv(envPeerAddr), Handler: e, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// echoPeerStore is the create handler: a 201 JSON body padded to size
// bytes, as the Fiber peer's.
func echoPeerStore(size int) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in struct{ Name, Domain string }
		if err := json.NewDecoder(c.Request().Body).Decode(&in); err != nil || in.Name == "" || in.Domain == "" {
			return c.JSON(http.StatusUnprocessableEntity, map[string]string{"message": "invalid"})
		}
		id := newKey()
		body, err := paddedLicense(id, in.Name, in.Domain, size)
		if err != nil {
			return err
		}
		c.Response().Header().Set(echo.HeaderLocation, "/api/licenses/"+id)
		return c.JSONBlob(http.StatusCreated, body)
	}
}

// echoBearer is the Fiber peer's bearer check (checkBearer) as Echo
// middleware: the token's row read by id on every request.
func echoBearer(db *sql.DB, ability string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			switch status, err := checkBearer(c.Request().Context(), db, c.Request().Header.Get(echo.HeaderAuthorization), ability); {
			case err != nil:
				return err
			case status == http.StatusUnauthorized:
				return c.JSON(status, map[string]string{"message": "Unauthenticated."})
			case status == http.StatusForbidden:
				return c.JSON(status, map[string]string{"message": "Invalid ability provided."})
			}
			return next(c)
		}
	}
}

// echoIdempotency is a minimal idempotency middleware, as Fiber's is: a
// stored answer is written back at once (one read of the storage); else
// the key is locked in this process, read again, and the handler's 2xx
// answer (status, the kept headers, body) stored for lifetime.
func echoIdempotency(store answerStore, lifetime time.Duration) echo.MiddlewareFunc {
	locks := &keyLocks{held: map[string]*keyLock{}}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key := c.Request().Header.Get("Idempotency-Key")
			if key == "" {
				return next(c)
			}
			if len(key) != 36 { // Fiber's default: a UUID
				return c.JSON(http.StatusBadRequest, map[string]string{"message": "invalid Idempotency-Key"})
			}
			if ok, err := writeStored(c, store, key); ok || err != nil {
				return err
			}
			unlock := locks.lock(key)
			defer unlock()
			if ok, err := writeStored(c, store, key); ok || err != nil {
				return err
			}
			rec := &recorder{ResponseWriter: c.Response().Writer}
			c.Response().Writer = rec
			if err := next(c); err != nil {
				return err
			}
			status := c.Response().Status
			if status < 200 || status > 299 {
				return nil
			}
			return store.Set(key, encodeAnswer(status, c.Response().Header(), rec.body.Bytes()), lifetime)
		}
	}
}

// answerStore is where the middleware keeps answers: the peers' sqlStorage.
type answerStore interface {
	Get(key string) ([]byte, error)
	Set(key string, val []byte, exp time.Duration) error
}

// writeStored writes the answer stored under key, if there is one.
func writeStored(c echo.Context, store answerStore, key string) (bool, error) {
	v, err := store.Get(key)
	if err != nil || v == nil {
		return false, err
	}
	status, headers, body, err := decodeAnswer(v)
	if err != nil {
		return false, err
	}
	h := c.Response().Header()
	for i := 0; i+1 < len(headers); i += 2 {
		h.Add(headers[i], headers[i+1])
	}
	c.Response().WriteHeader(status)
	_, err = c.Response().Write(body)
	return true, err
}

// recorder keeps a copy of what the handler writes.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// keptHeaders are the headers a stored answer keeps (Fiber peer's
// KeepResponseHeaders).
var keptHeaders = []string{echo.HeaderContentType, echo.HeaderLocation}

// encodeAnswer is a stored answer: the status, then each kept header's
// name and value, then the body, each length-prefixed.
func encodeAnswer(status int, h http.Header, body []byte) []byte {
	out := binary.AppendUvarint(nil, uint64(status))
	for _, name := range keptHeaders {
		for _, v := range h.Values(name) {
			out = binary.AppendUvarint(out, uint64(len(name)))
			out = append(out, name...)
			out = binary.AppendUvarint(out, uint64(len(v)))
			out = append(out, v...)
		}
	}
	out = binary.AppendUvarint(out, 0) // no more headers
	return append(out, body...)
}

// decodeAnswer reads what encodeAnswer wrote: headers as name, value pairs.
func decodeAnswer(b []byte) (status int, headers []string, body []byte, err error) {
	errCorrupt := errors.New("echo peer: a stored answer is corrupt")
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func(n uint64) (string, bool) {
		if uint64(len(b)) < n {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	st, ok := next()
	if !ok {
		return 0, nil, nil, errCorrupt
	}
	for {
		n, ok := next()
		if !ok {
			return 0, nil, nil, errCorrupt
		}
		if n == 0 {
			return int(st), headers, b, nil
		}
		name, ok := str(n)
		if !ok {
			return 0, nil, nil, errCorrupt
		}
		vn, ok := next()
		if !ok {
			return 0, nil, nil, errCorrupt
		}
		value, ok := str(vn)
		if !ok {
			return 0, nil, nil, errCorrupt
		}
		headers = append(headers, name, value)
	}
}

// keyLocks are the per-key locks of one process (Fiber's MemoryLock).
type keyLocks struct {
	mu   sync.Mutex
	held map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes key's lock and returns its release.
func (l *keyLocks) lock(key string) func() {
	l.mu.Lock()
	k := l.held[key]
	if k == nil {
		k = &keyLock{}
		l.held[key] = k
	}
	k.refs++
	l.mu.Unlock()
	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		if k.refs--; k.refs == 0 {
			delete(l.held, key)
		}
		l.mu.Unlock()
	}
}
