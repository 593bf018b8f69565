package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/database"
)

// Dialects the bench runs on.
const (
	dialectSQLite = "sqlite"
	dialectMySQL  = "mysql"
)

// dbTarget is one database licensor (and the seeder, and the Fiber peer)
// runs on: a SQLite file in the temporary directory, or a MariaDB scratch
// database.
type dbTarget struct {
	name    string // short, for logs and process names
	dialect string
	env     []string // DB_* for licensor
	bin     string   // the licensor that migrates and serves it
}

// newTarget makes an empty database: a fresh SQLite path, or a MariaDB
// scratch database (licensor_bench_<pid>[_suffix]) migrated with
// `licensor migrate`, which cleanup drops.
func (b *bench) newTarget(ctx context.Context, dialect, suffix string) (*dbTarget, error) {
	return b.newTargetOf(ctx, b.bin, dialect, suffix)
}

// newTargetOf is newTarget for the licensor at bin, which migrates it.
func (b *bench) newTargetOf(ctx context.Context, bin, dialect, suffix string) (*dbTarget, error) {
	t := &dbTarget{name: dialect + "-" + suffix, dialect: dialect, bin: bin}
	if dialect == dialectSQLite {
		t.env = []string{"DB_CONNECTION=sqlite", "DB_DATABASE=" + filepath.Join(b.tmp, suffix+".sqlite")}
		// The commands run before serve (token issue) open only a database
		// that exists: migrate creates it, as an operator would.
		if _, err := b.licensorCLI(ctx, t, "migrate"); err != nil {
			return nil, err
		}
		return t, nil
	}
	name := fmt.Sprintf("licensor_bench_%d", os.Getpid())
	if suffix != "main" {
		name += "_" + suffix
	}
	if err := createScratch(ctx, b.opts.mysqlDSN, name); err != nil {
		return nil, err
	}
	b.scratches = append(b.scratches, name)
	dsn, err := withDBName(b.opts.mysqlDSN, name)
	if err != nil {
		return nil, err
	}
	t.env = []string{"DB_CONNECTION=mysql", "DB_URL=" + dsn}
	if _, err := b.licensorCLI(ctx, t, "migrate"); err != nil {
		return nil, err
	}
	return t, nil
}

// config is the database configuration licensor reads from the target's
// environment, through licensor's own config.Load.
func (b *bench) config(t *dbTarget) (config.Config, error) {
	env := map[string]string{}
	for _, kv := range b.licensorEnv(t) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return config.Load(func(k string) string { return env[k] })
}

// open opens the target the way licensor does (database.Open: the same
// driver, DSN and pragmas) and returns its *sql.DB.
func (b *bench) open(ctx context.Context, t *dbTarget) (*sql.DB, error) {
	cfg, err := b.config(t)
	if err != nil {
		return nil, err
	}
	gdb, err := database.Open(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	return gdb.DB()
}

// withDBName is the server DSN with the database name set.
func withDBName(serverDSN, name string) (string, error) {
	c, err := mysqldriver.ParseDSN(serverDSN)
	if err != nil {
		return "", fmt.Errorf("-mysql: %w", err)
	}
	c.DBName = name
	return c.FormatDSN(), nil
}

// serverDB connects to the MariaDB server without a database.
func serverDB(serverDSN string) (*sql.DB, error) {
	dsn, err := withDBName(serverDSN, "")
	if err != nil {
		return nil, err
	}
	return sql.Open("mysql", dsn)
}

func createScratch(ctx context.Context, serverDSN, name string) error {
	db, err := serverDB(serverDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// dropScratch drops a scratch database; it runs at cleanup, after Ctrl-C
// too, so it has its own deadline rather than the run's context.
func dropScratch(serverDSN, name string) error {
	db, err := serverDB(serverDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}
