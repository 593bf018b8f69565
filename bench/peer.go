package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/idempotency"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// peerCommand is the hidden subcommand that runs the Fiber peer: the bench
// re-executes itself with it, so the peer is a process of its own whose CPU
// is measured like licensor's.
const peerCommand = "peer"

// The peer's settings, from its environment (beside licensor's DB_* and
// APP_*, which config.Load reads).
const (
	envPeerAddr     = "PEER_ADDR"
	envPeerTokenID  = "PEER_TOKEN_ID"
	envPeerSecret   = "PEER_TOKEN_SECRET"
	envPeerBodySize = "PEER_BODY_SIZE"
)

// runPeer serves POST /api/licenses with Fiber: a Sanctum-like bearer check
// (one token row read per request), then Fiber's idempotency middleware
// over a storage in the same database licensor uses, then a handler that
// answers 201 with a body of licensor's size.
func runPeer(args []string) error {
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
	db, store, bodySize := s.db, s.store, s.bodySize

	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Post("/api/licenses",
		bearer(db, "licenses:write"),
		idempotency.New(idempotency.Config{
			KeyHeader:           "Idempotency-Key",
			Lifetime:            24 * time.Hour,
			KeepResponseHeaders: []string{"Content-Type", "Location"},
			Storage:             store,
		}),
		peerStore(bodySize))
	errc := make(chan error, 1)
	go func() { errc <- app.Listen(os.Getenv(envPeerAddr)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return app.ShutdownWithTimeout(10 * time.Second)
	}
}

// peerSetup is what both peers serve from: the database, its storage of
// answers and the token the bench made, and the size of licensor's body.
type peerSetup struct {
	db       *sql.DB
	store    *sqlStorage
	bodySize int
}

// openPeer opens the peer's database (licensor's DB_* settings), creates
// its tables and stores its token.
func openPeer(ctx context.Context) (peerSetup, error) {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return peerSetup{}, err
	}
	bodySize, err := strconv.Atoi(os.Getenv(envPeerBodySize))
	if err != nil {
		return peerSetup{}, fmt.Errorf("%s: %w", envPeerBodySize, err)
	}
	gdb, err := database.Open(ctx, cfg.DB)
	if err != nil {
		return peerSetup{}, err
	}
	db, err := gdb.DB()
	if err != nil {
		return peerSetup{}, err
	}
	store := &sqlStorage{db: db, dialect: cfg.DB.Connection}
	if err := store.migrate(ctx); err != nil {
		_ = db.Close()
		return peerSetup{}, err
	}
	if err := addPeerToken(ctx, db, os.Getenv(envPeerTokenID), os.Getenv(envPeerSecret)); err != nil {
		_ = db.Close()
		return peerSetup{}, err
	}
	return peerSetup{db: db, store: store, bodySize: bodySize}, nil
}

// peerStore is the create handler: a 201 JSON body padded to size bytes.
func peerStore(size int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var in struct{ Name, Domain string }
		if err := json.Unmarshal(c.Body(), &in); err != nil || in.Name == "" || in.Domain == "" {
			return c.Status(fiber.StatusUnprocessableEntity).JSON(fiber.Map{"message": "invalid"})
		}
		id := newKey()
		body, err := paddedLicense(id, in.Name, in.Domain, size)
		if err != nil {
			return err
		}
		c.Location("/api/licenses/" + id)
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(fiber.StatusCreated).Send(body)
	}
}

// paddedLicense is a peer's create answer: the license's fields, padded to
// size bytes when it is shorter.
func paddedLicense(id, name, domain string, size int) ([]byte, error) {
	doc := map[string]map[string]string{"data": {"id": id, "name": name, "domain": domain, "pad": ""}}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if pad := size - len(body); pad > 0 {
		doc["data"]["pad"] = strings.Repeat("x", pad)
		return json.Marshal(doc)
	}
	return body, nil
}

// bearer is Sanctum's guard (see checkBearer) as Fiber middleware.
func bearer(db *sql.DB, ability string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		switch status, err := checkBearer(c.UserContext(), db, c.Get(fiber.HeaderAuthorization), ability); {
		case err != nil:
			return err
		case status == fiber.StatusUnauthorized:
			return c.Status(status).JSON(fiber.Map{"message": "Unauthenticated."})
		case status == fiber.StatusForbidden:
			return c.Status(status).JSON(fiber.Map{"message": "Invalid ability provided."})
		}
		return c.Next()
	}
}

// checkBearer is Sanctum's guard, both peers': "Bearer <id>|<secret>", the
// token's row read by id on every request, sha256(secret) compared in
// constant time, the ability and the expiry checked. It answers 0 for a
// token that may go on, else 401 or 403.
func checkBearer(ctx context.Context, db *sql.DB, authorization, ability string) (int, error) {
	raw, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok {
		return http.StatusUnauthorized, nil
	}
	id, secret, ok := strings.Cut(raw, "|")
	if !ok {
		return http.StatusUnauthorized, nil
	}
	var (
		rowID, hash, abilities string
		expires                int64
	)
	err := db.QueryRowContext(ctx, "SELECT id, token_hash, abilities, expires_at FROM peer_tokens WHERE id = ?", id).
		Scan(&rowID, &hash, &abilities, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return http.StatusUnauthorized, nil
	}
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(hash)) != 1 || time.Now().Unix() >= expires {
		return http.StatusUnauthorized, nil
	}
	var abs []string
	if err := json.Unmarshal([]byte(abilities), &abs); err != nil || !(contains(abs, ability) || contains(abs, "*")) {
		return http.StatusForbidden, nil
	}
	return 0, nil
}

// addPeerToken stores the token the bench made, as Sanctum stores one: the
// sha256 of its secret.
func addPeerToken(ctx context.Context, db *sql.DB, id, secret string) error {
	if id == "" || secret == "" {
		return fmt.Errorf("%s and %s are required", envPeerTokenID, envPeerSecret)
	}
	sum := sha256.Sum256([]byte(secret))
	// A restarted peer finds its token from the last start.
	if _, err := db.ExecContext(ctx, "DELETE FROM peer_tokens WHERE id = ?", id); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "INSERT INTO peer_tokens (id, token_hash, abilities, expires_at) VALUES (?, ?, ?, ?)",
		id, hex.EncodeToString(sum[:]), `["licenses:read","licenses:write"]`, time.Now().Add(24*time.Hour).Unix())
	return err
}
