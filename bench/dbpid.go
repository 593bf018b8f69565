package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// serverPID finds the pid of the MariaDB/MySQL server behind serverDSN, so
// that the benchmark measures that server's CPU, not that of whichever
// mariadbd /proc lists first (a Galera test node, another instance). It
// asks, in order: the process listening on the DSN's TCP port on this
// machine (/proc/net/tcp and tcp6 → socket inode → /proc/*/fd), then the
// pid file the server names (SELECT @@pid_file). how says which answered,
// or why none did (pid 0: its CPU is not measured).
func serverPID(ctx context.Context, serverDSN string) (pid int, how string) {
	cfg, err := mysqldriver.ParseDSN(serverDSN)
	if err != nil {
		return 0, "the DSN does not parse: " + err.Error()
	}
	if cfg.Net == "tcp" {
		if _, p, err := net.SplitHostPort(cfg.Addr); err == nil {
			if port, err := strconv.Atoi(p); err == nil {
				if pid := listeningPID(port); pid != 0 {
					return pid, fmt.Sprintf("the process listening on port %d", port)
				}
			}
		}
	}
	db, err := serverDB(serverDSN)
	if err != nil {
		return 0, err.Error()
	}
	defer db.Close()
	var pidFile sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile); err != nil {
		return 0, "SELECT @@pid_file: " + err.Error()
	}
	if pid := pidFromFile(pidFile.String); pid != 0 {
		return pid, "the server's pid file " + pidFile.String
	}
	return 0, fmt.Sprintf("no process listens on %s here and the pid file %q names no running process (a server on another machine?)", cfg.Addr, pidFile.String)
}

// listeningPID is the pid of the process holding a listening TCP socket on
// port (any local address, IPv4 or IPv6), 0 when none is found.
func listeningPID(port int) int {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, inode := range listeningInodes(string(data), port) {
			inodes[inode] = true
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	return pidWithSocket(inodes)
}

// listeningInodes reads a /proc/net/tcp{,6} table: the inodes of the
// sockets listening (state 0A) on port.
func listeningInodes(table string, port int) []string {
	var out []string
	for i, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 10 || f[3] != "0A" {
			continue // the header, a short line, or not LISTEN
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); !ok || err != nil || int(p) != port {
			continue
		}
		if f[9] != "0" {
			out = append(out, f[9])
		}
	}
	return out
}

// pidWithSocket is the pid of a process one of whose file descriptors is
// one of the socket inodes, 0 when none is (or /proc/<pid>/fd is not
// readable: another user's process, without root).
func pidWithSocket(inodes map[string]bool) int {
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(fd))))
			if err == nil {
				return pid
			}
		}
	}
	return 0
}

// pidFromFile reads a pid file, 0 unless it names a running process.
func pidFromFile(path string) int {
	if path == "" {
		return 0
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return 0
	}
	return pid
}
