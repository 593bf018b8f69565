package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A listening socket is found by its port: this process listens, and the
// resolver names this process, on IPv4 and on IPv6.
func TestListeningPIDFindsTheListener(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := "127.0.0.1:0"
		if network == "tcp6" {
			addr = "[::1]:0"
		}
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("%s: %v (no %s here)", network, err, network)
			continue
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if got := listeningPID(port); got != os.Getpid() {
			t.Errorf("%s: listeningPID(%d) = %d, want this process, %d", network, port, got, os.Getpid())
		}
		ln.Close()
		if got := listeningPID(port); got != 0 {
			t.Errorf("%s: listeningPID(%d) after close = %d, want 0", network, port, got)
		}
	}
}

// The table's parsing: only LISTEN (0A) rows on the port, by inode.
func TestListeningInodes(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   101        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0CEA 0100007F:D431 01 00000000:00000000 00:00000000 00000000   101        0 5151 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:0CEB 00000000:0000 0A 00000000:00000000 00:00000000 00000000   101        0 6161 1 0000000000000000 100 0 0 10 0
`
	got := listeningInodes(table, 3306)
	if len(got) != 1 || got[0] != "4242" {
		t.Errorf("listeningInodes(…, 3306) = %v, want [4242]: the LISTEN row of port 3306 (0x0CEA) only", got)
	}
	if got := listeningInodes(table, 3308); len(got) != 0 {
		t.Errorf("listeningInodes(…, 3308) = %v, want none", got)
	}
}

// A pid file counts only when it names a running process.
func TestPIDFromFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := pidFromFile(write("mine.pid", strconv.Itoa(os.Getpid())+"\n")); got != os.Getpid() {
		t.Errorf("a pid file naming this process: %d, want %d", got, os.Getpid())
	}
	for name, s := range map[string]string{"junk.pid": "mariadb", "gone.pid": "999999999", "zero.pid": "0"} {
		if got := pidFromFile(write(name, s)); got != 0 {
			t.Errorf("pid file %q: %d, want 0", s, got)
		}
	}
	if got := pidFromFile(filepath.Join(dir, "missing.pid")); got != 0 {
		t.Errorf("a missing pid file: %d, want 0", got)
	}
}

// The DSN's server, when there is one (MYSQL_DSN or TEST_MYSQL_DSN): the
// pid found is a mariadbd/mysqld, the one the DSN reaches.
func TestServerPIDOfDSN(t *testing.T) {
	dsn := os.Getenv("MYSQL_DSN")
	if dsn == "" {
		dsn = os.Getenv("TEST_MYSQL_DSN")
	}
	if dsn == "" {
		t.Skip("no MYSQL_DSN or TEST_MYSQL_DSN: no server to find")
	}
	pid, how := serverPID(context.Background(), dsn)
	if pid == 0 {
		t.Fatalf("serverPID(%s) found none: %s", dsn, how)
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if name := string(comm); err != nil || (name != "mariadbd\n" && name != "mysqld\n") {
		t.Errorf("serverPID = %d (%s), command %q, %v: want the MariaDB server", pid, how, comm, err)
	}
}
