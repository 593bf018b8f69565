package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/licensor-api/licensor/internal/testkit"
)

// galeraProvider is where Debian's galera-4 package puts the wsrep provider.
const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// galeraDatabase is the database the cluster's first node creates for
// licensor; it replicates to the others.
const galeraDatabase = "licensor"

// galeraCluster is a MariaDB Galera cluster of local mariadbd processes,
// each on its own ports of 127.0.0.1 and its own directory, started by the
// test and stopped (and removed) when it ends.
type galeraCluster struct {
	t     *testing.T
	dir   string
	nodes []*galeraNode
	bin   galeraBinaries
	owner *user.User // the mysql user the nodes run as when the test runs as root; nil otherwise
}

// galeraNode is one mariadbd of the cluster.
type galeraNode struct {
	name                            string
	dir, datadir, tmp, socket, conf string
	sql, gcomm, ist, sst            int // ports on 127.0.0.1
	cmd                             *exec.Cmd
	output                          *testkit.Buffer
	exited                          chan struct{} // closed when the process has ended
	db                              *sql.DB       // root over TCP, no database selected
}

// galeraBinaries are the programs a cluster needs.
type galeraBinaries struct {
	mariadbd, installDB string
}

// galeraNeeds finds mariadbd, mariadb-install-db, the Galera provider and
// rsync (the state transfer). When one is missing the test is skipped with
// what to install, or fails under CI=true, where they are installed.
func galeraNeeds(t *testing.T) galeraBinaries {
	t.Helper()
	var b galeraBinaries
	var missing []string
	look := func(dst *string, names ...string) {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				*dst = p
				return
			}
			if p := "/usr/sbin/" + n; fileExists(p) {
				*dst = p
				return
			}
		}
		missing = append(missing, names[0])
	}
	look(&b.mariadbd, "mariadbd", "mysqld")
	look(&b.installDB, "mariadb-install-db", "mysql_install_db")
	var rsync string
	look(&rsync, "rsync")
	if !fileExists(galeraProvider) {
		missing = append(missing, galeraProvider+" (package galera-4)")
	}
	if len(missing) > 0 {
		msg := "Galera test needs " + strings.Join(missing, ", ") +
			": apt-get install -y mariadb-server galera-4 rsync (see docs/galera.md)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but the " + msg)
		}
		t.Skip(msg)
	}
	return b
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// galeraPorts picks n distinct free ports on 127.0.0.1, below the
// kernel's ephemeral range. A node binds its ports seconds after they are
// picked (the last joiner's SST port ten seconds or more later), and a port
// of the ephemeral range may be handed meanwhile to any outgoing connection
// of the machine as its local port: the rsync daemon of a state transfer
// then fails to bind it and the joiner dies ("the rsync or stunnel daemon
// terminated unexpectedly", exit 16). Below the range only a process that
// binds that very port can take it.
func galeraPorts(t *testing.T, n int) []int {
	t.Helper()
	low := ephemeralLow()
	const first = 10000
	if low-first < 100*n {
		t.Fatalf("the ephemeral port range starts at %d: too few ports below it for the cluster", low)
	}
	seen := map[int]bool{}
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			t.Fatalf("no %d free ports in [%d, %d) on 127.0.0.1", n, first, low)
		}
		port := first + rand.IntN(low-first)
		if seen[port] {
			continue
		}
		seen[port] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken
		}
		ln.Close()
		ports = append(ports, port)
	}
	return ports
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; 32768, its default, where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return low
}

// newGaleraCluster starts a cluster of size nodes: the first bootstraps it
// (--wsrep-new-cluster) on a fresh data directory, the others join it one
// after the other and receive its state by rsync. It returns once every
// node is Synced in a cluster of that size, with galeraDatabase created.
func newGaleraCluster(t *testing.T, size int) *galeraCluster {
	t.Helper()
	c := &galeraCluster{t: t, bin: galeraNeeds(t)}
	if os.Geteuid() == 0 {
		// mariadbd refuses to run as root without --user, and the rsync
		// state transfer fails as root: run the nodes as mysql.
		u, err := user.Lookup("mysql")
		if err != nil {
			t.Fatalf("the test runs as root and there is no mysql user to run mariadbd as: %v", err)
		}
		c.owner = u
	}
	dir, err := os.MkdirTemp("", "licensor-galera-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("%s (mariadbd) output:\n%s\nerror log:\n%s", n.name, galeraTail(n.output.String(), 2000), n.errorLog(6000))
			}
		}
		_ = os.RemoveAll(c.dir)
	})

	ports := galeraPorts(t, 4*size)
	var gcomm []string
	for i := range size {
		n := &galeraNode{
			name: fmt.Sprintf("node%d", i+1), sql: ports[4*i], gcomm: ports[4*i+1], ist: ports[4*i+2], sst: ports[4*i+3],
			output: &testkit.Buffer{}, exited: make(chan struct{}),
		}
		n.dir = filepath.Join(dir, n.name)
		n.datadir, n.socket, n.conf = filepath.Join(n.dir, "data"), filepath.Join(n.dir, "mysqld.sock"), filepath.Join(n.dir, "my.cnf")
		// A temporary directory of the node's own, not the machine's /tmp,
		// which other processes share (and clean).
		n.tmp = filepath.Join(n.dir, "tmp")
		for _, d := range []string{n.datadir, n.tmp} {
			if err := os.MkdirAll(d, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		c.nodes = append(c.nodes, n)
		gcomm = append(gcomm, fmt.Sprintf("127.0.0.1:%d", n.gcomm))
	}
	// Galera carries the group name in a 32-byte field: keep it short.
	cluster := "licensor-" + strings.TrimPrefix(filepath.Base(dir), "licensor-galera-")
	for _, n := range c.nodes {
		if err := os.WriteFile(n.conf, []byte(c.config(n, cluster, strings.Join(gcomm, ","))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.chown()
	c.installDB(c.nodes[0])

	began := time.Now()
	c.startNode(c.nodes[0], "--wsrep-new-cluster")
	c.waitSynced(c.nodes[0], 1)
	first := c.nodes[0].db
	for _, stmt := range []string{
		"CREATE DATABASE `" + galeraDatabase + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
		// install-db's root users: make sure root may connect over TCP from
		// 127.0.0.1 without a password; the grant replicates.
		"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''",
		"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
	} {
		if _, err := first.Exec(stmt); err != nil {
			t.Fatalf("%s: %s: %v", c.nodes[0].name, stmt, err)
		}
	}
	for i, n := range c.nodes[1:] {
		c.startNode(n)
		c.waitSynced(n, i+2)
	}
	for _, n := range c.nodes {
		c.waitSynced(n, size)
	}
	t.Logf("Galera cluster of %d nodes Synced in %s (SQL ports %s)", size, time.Since(began).Round(time.Millisecond), c.sqlPorts())
	return c
}

func (c *galeraCluster) sqlPorts() string {
	var p []string
	for _, n := range c.nodes {
		p = append(p, strconv.Itoa(n.sql))
	}
	return strings.Join(p, ", ")
}

// config is a node's option file: only it is read (--defaults-file), so the
// system MariaDB's configuration stays out of the test.
func (c *galeraCluster) config(n *galeraNode, cluster, gcomm string) string {
	userLine := ""
	if c.owner != nil {
		userLine = "user = mysql\n"
	}
	return "[mysqld]\n" + userLine + fmt.Sprintf(`datadir = %s
tmpdir = %s
socket = %s
pid-file = %s
port = %d
bind-address = 127.0.0.1
skip-name-resolve
log-error = %s
character-set-server = utf8mb4
collation-server = utf8mb4_unicode_ci
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
innodb_buffer_pool_size = 64M
innodb_log_file_size = 16M
innodb_flush_log_at_trx_commit = 2
max_connections = 300
wsrep_on = ON
wsrep_provider = %s
wsrep_cluster_name = %s
wsrep_cluster_address = gcomm://%s
wsrep_node_name = %s
wsrep_node_address = 127.0.0.1:%d
wsrep_provider_options = "gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=32M"
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:%d
wsrep_slave_threads = 2
# A statement that loses certification reaches licensor as the deadlock
# (1213) it is, rather than being run again by the server first: the test
# exercises licensor's own conflict handling.
wsrep_retry_autocommit = 0
`, n.datadir, n.tmp, n.socket, filepath.Join(n.dir, "mysqld.pid"), n.sql, filepath.Join(n.dir, "error.log"),
		galeraProvider, cluster, gcomm, n.name, n.gcomm, n.gcomm, n.ist, n.sst)
}

// installDB makes the system tables of a fresh data directory; root may
// log in without a password. The joiners receive theirs by state transfer.
func (c *galeraCluster) installDB(n *galeraNode) {
	c.t.Helper()
	args := []string{"--no-defaults", "--datadir=" + n.datadir, "--tmpdir=" + n.tmp, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve"}
	if c.owner != nil {
		args = append(args, "--user=mysql")
	}
	cmd := exec.Command(c.bin.installDB, args...)
	cmd.Dir, cmd.Env = n.dir, append(os.Environ(), "TMPDIR="+n.tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
}

// chown gives the cluster's directory to the mysql user the nodes run as.
func (c *galeraCluster) chown() {
	c.t.Helper()
	if c.owner == nil {
		return
	}
	uid, _ := strconv.Atoi(c.owner.Uid)
	gid, _ := strconv.Atoi(c.owner.Gid)
	err := filepath.WalkDir(c.dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		c.t.Fatalf("chown %s: %v", c.dir, err)
	}
}

// startNode starts a node's mariadbd in a process group of its own, so that
// the stop reaches the state-transfer scripts it runs too.
func (c *galeraCluster) startNode(n *galeraNode, extra ...string) {
	c.t.Helper()
	n.cmd = exec.Command(c.bin.mariadbd, append([]string{"--defaults-file=" + n.conf}, extra...)...)
	n.cmd.Stdout, n.cmd.Stderr = n.output, n.output
	n.cmd.Env = append(os.Environ(), "TMPDIR="+n.tmp) // the state transfer's scripts too
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", n.name, err)
	}
	go func() {
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	cfg := mysqldriver.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", n.sql)
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Second, 10*time.Second, 10*time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		c.t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	n.db = db
}

// stop ends every node: SIGTERM, then SIGKILL to its process group when it
// has not ended by the deadline.
func (c *galeraCluster) stop() {
	for _, n := range c.nodes {
		if n.db != nil {
			n.db.Close()
		}
		if n.cmd != nil && n.cmd.Process != nil {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(20 * time.Second)
	for _, n := range c.nodes {
		if n.cmd == nil || n.cmd.Process == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-deadline:
			c.t.Logf("%s did not stop on SIGTERM in time: SIGKILL", n.name)
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
			<-n.exited
		}
		// Any state-transfer helper it left behind.
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// status is a node's wsrep status variables (SHOW STATUS LIKE 'wsrep_%').
func (n *galeraNode) status(ctx context.Context) (map[string]string, error) {
	rows, err := n.db.QueryContext(ctx, "SHOW STATUS LIKE 'wsrep_%'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		st[k] = v
	}
	return st, rows.Err()
}

// waitSynced polls the node's wsrep status until it is Synced, ready, in a
// primary component of size nodes; it fails at the deadline, or at once when
// the node has died.
func (c *galeraCluster) waitSynced(n *galeraNode, size int) {
	c.t.Helper()
	want := strconv.Itoa(size)
	var last string
	synced := func() bool {
		select {
		case <-n.exited:
			c.t.Fatalf("%s exited while waiting for it to be Synced:\n%s\n%s", n.name, galeraTail(n.output.String(), 3000), n.errorLog(6000))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := n.status(ctx)
		cancel()
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("cluster_size=%s state=%s ready=%s status=%s", st["wsrep_cluster_size"],
			st["wsrep_local_state_comment"], st["wsrep_ready"], st["wsrep_cluster_status"])
		return st["wsrep_cluster_size"] == want && st["wsrep_local_state_comment"] == "Synced" &&
			st["wsrep_ready"] == "ON" && st["wsrep_cluster_status"] == "Primary"
	}
	if testkit.Poll(60*time.Second, synced) {
		return
	}
	c.t.Fatalf("%s not Synced in a cluster of %d in time; last: %s\n%s", n.name, size, last, n.errorLog(6000))
}

// errorLog is the end of the node's error log.
func (n *galeraNode) errorLog(max int) string {
	b, err := os.ReadFile(filepath.Join(n.dir, "error.log"))
	if err != nil {
		return "(no error log: " + err.Error() + ")"
	}
	return galeraTail(string(b), max)
}

// dsn is the DB_URL of licensor's database on the node.
func (n *galeraNode) dsn() string { return n.dsnOf(galeraDatabase) }

// dsnOf is the DB_URL of a database on the node.
func (n *galeraNode) dsnOf(database string) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", n.sql, database)
}

// gooseVersion is the newest migration the node has applied to database,
// as the node has it now (no causal read): 0 when it has none, or no
// version table yet.
func (n *galeraNode) gooseVersion(ctx context.Context, database string) (int64, error) {
	var v sql.NullInt64
	err := n.db.QueryRowContext(ctx, "SELECT MAX(version_id) FROM `"+database+"`.goose_db_version WHERE is_applied").Scan(&v)
	if me := (*mysqldriver.MySQLError)(nil); errors.As(err, &me) && me.Number == 1146 { // no such table (yet)
		return 0, nil
	}
	return v.Int64, err
}

// waitMigrated polls every node until it has applied the newest migration
// `licensor migrate` committed through the first node; it fails at the
// deadline, or at once when a node has died.
func (c *galeraCluster) waitMigrated(database string) {
	c.t.Helper()
	ctx := context.Background()
	want, err := c.nodes[0].gooseVersion(ctx, database)
	if err != nil || want == 0 {
		c.t.Fatalf("%s: migrated to version %d: %v", c.nodes[0].name, want, err)
	}
	began := time.Now()
	for _, n := range c.nodes[1:] {
		var got int64
		var last error
		reached := func() bool {
			select {
			case <-n.exited:
				c.t.Fatalf("%s exited while waiting for the migration:\n%s", n.name, n.errorLog(6000))
			default:
			}
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			got, last = n.gooseVersion(qctx, database)
			return last == nil && got == want
		}
		if !testkit.Poll(30*time.Second, reached) {
			c.t.Fatalf("%s holds migration %d (%v), not the newest %d, after 30 s", n.name, got, last, want)
		}
	}
	c.t.Logf("every node holds migration %d (%s after migrate returned)", want, time.Since(began).Round(time.Millisecond))
}

func galeraTail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return "…" + s[len(s)-max:]
}
