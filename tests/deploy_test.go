package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/console"
	"github.com/licensor-api/licensor/config"
	"github.com/licensor-api/licensor/internal/testkit"
)

// The deployment files (Dockerfile, compose.yaml, deploy/prometheus.yml,
// the static build in .ci/run) are checked here against the code they
// deploy: the variables config reads, the commands the binary has, the
// address it listens on. No container engine is needed.

// configVars is every environment variable config.Load asks for. Load asks
// through getenv for each variable it reads; it is run twice, on the
// defaults and with the variables that switch branches on (production,
// MySQL, the http vendor), so that a variable read only in some branch is
// found too. It runs in an empty directory, so no .env is read.
func configVars(t *testing.T) map[string]bool {
	t.Helper()
	t.Chdir(t.TempDir())
	seen := map[string]bool{}
	for _, env := range []map[string]string{
		{"APP_ENV": config.EnvTesting},
		{"APP_ENV": config.EnvProduction, "APP_KEY": config.EncodeKey(testKey), "APP_URL": "https://licensor.test", "DB_CONNECTION": "mysql",
			"VENDOR_DRIVER": "http", "VENDOR_URL": "http://vendor.test", "VENDOR_TOKEN": "t"},
	} {
		if _, err := config.Load(func(name string) string { seen[name] = true; return env[name] }); err != nil {
			t.Fatalf("config.Load(%v): %v", env, err)
		}
	}
	for _, must := range []string{"APP_ADDR", "APP_KEY", "DB_CONNECTION", "DB_HOST", "VENDOR_URL", "VENDOR_TOKEN"} {
		if !seen[must] {
			t.Fatalf("the recorder missed %s: it sees %v", must, seen)
		}
	}
	return seen
}

// helpCommands is the commands `licensor help` lists.
func helpCommands(t *testing.T) []string {
	t.Helper()
	var out, errs bytes.Buffer
	if err := console.Run(context.Background(), []string{"help"}, func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatalf("licensor help: %v\n%s", err, errs.String())
	}
	var names []string
	listing := false
	for line := range strings.Lines(out.String()) {
		switch {
		case strings.TrimSpace(line) == "commands:":
			listing = true
		case listing && strings.HasPrefix(line, "  "):
			names = append(names, strings.Fields(line)[0])
		case listing && strings.TrimSpace(line) == "":
			listing = len(names) == 0
		}
	}
	for _, must := range []string{"serve", "migrate", "vendor-sim", "healthcheck", "backup"} {
		if !slices.Contains(names, must) {
			t.Fatalf("licensor help lists %v: no %s", names, must)
		}
	}
	return names
}

// dockerfile is a Dockerfile's stages, each its instructions in order.
type dockerStage struct {
	from, name string
	instrs     []dockerInstr
}

type dockerInstr struct {
	cmd  string // upper case
	args string
	line int
}

func parseDockerfile(t *testing.T, src string) []dockerStage {
	t.Helper()
	var stages []dockerStage
	var cont strings.Builder
	first := 0
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") || (line == "" && cont.Len() == 0) {
			continue // comments, also between continued lines
		}
		if cont.Len() == 0 {
			first = i + 1
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cont.WriteString(body + " ")
			continue
		}
		cont.WriteString(line)
		full := strings.TrimSpace(cont.String())
		cont.Reset()
		if full == "" {
			continue
		}
		cmd, args, _ := strings.Cut(full, " ")
		in := dockerInstr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: first}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := dockerStage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile line %d: %s before FROM", in.line, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	return stages
}

func (s dockerStage) all(cmd string) []dockerInstr {
	var out []dockerInstr
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// last is the stage's last cmd instruction, the one in force; ok false
// when there is none.
func (s dockerStage) last(cmd string) (dockerInstr, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return dockerInstr{}, false
	}
	return all[len(all)-1], true
}

// execForm reads a JSON-array instruction argument (exec form).
func execForm(t *testing.T, in dockerInstr) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("Dockerfile line %d: %s %s is not in exec form [\"...\"] (distroless has no shell)", in.line, in.cmd, in.args)
	}
	return argv
}

// dockerEnv reads the stage's ENV instructions (KEY=VALUE pairs, values
// optionally double-quoted).
func dockerEnv(t *testing.T, s dockerStage) map[string]string {
	t.Helper()
	env := map[string]string{}
	pair := regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)`)
	for _, in := range s.all("ENV") {
		matches := pair.FindAllStringSubmatch(in.args, -1)
		if len(matches) == 0 || strings.TrimSpace(pair.ReplaceAllString(in.args, "")) != "" {
			t.Fatalf("Dockerfile line %d: ENV %s: write ENV KEY=VALUE [KEY=VALUE...]", in.line, in.args)
		}
		for _, m := range matches {
			env[m[1]] = strings.Trim(m[2], `"`)
		}
	}
	return env
}

// versionVar and commitVar are the variables the image's build stamps with
// its VERSION and COMMIT build arguments (app/console/version.go).
const (
	versionVar = "github.com/licensor-api/licensor/app/console.stampedVersion"
	commitVar  = "github.com/licensor-api/licensor/app/console.stampedCommit"
)

// unstamped is go build flags without their -X stamps.
func unstamped(flags string) string {
	return regexp.MustCompile(` -X [^ "]+`).ReplaceAllString(flags, "")
}

// buildFlags is the flags of a `go build ... -o OUT .` command line,
// between "go build" and "-o".
func buildFlags(cmdline string) (flags, out string, ok bool) {
	_, rest, ok := strings.Cut(cmdline, "go build ")
	if !ok {
		return "", "", false
	}
	flags, rest, ok = strings.Cut(rest, "-o ")
	if !ok {
		return "", "", false
	}
	out, _, _ = strings.Cut(strings.TrimSpace(rest), " ")
	return strings.TrimSpace(flags), out, true
}

func portOf(t *testing.T, what, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", what, addr, err)
	}
	return port
}

// repoRoot is the repository, found before any test changes directory.
var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deployment is what the Dockerfile says about the image, read once.
type deployment struct {
	build, final dockerStage
	env          map[string]string // the final stage's ENV
	port         string            // EXPOSE
}

func readDockerfile(t *testing.T) deployment {
	t.Helper()
	stages := parseDockerfile(t, readRepoFile(t, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a runtime stage", len(stages))
	}
	d := deployment{build: stages[0], final: stages[len(stages)-1]}
	d.env = dockerEnv(t, d.final)
	expose := d.final.all("EXPOSE")
	if len(expose) != 1 || len(strings.Fields(expose[0].args)) != 1 {
		t.Fatalf("want one EXPOSE of one port, got %v", expose)
	}
	d.port = strings.TrimSuffix(expose[0].args, "/tcp")
	return d
}

// The Dockerfile builds the static binary CI builds and runs it as a
// non-root user, on distroless, with settings config reads.
func TestDeployDockerfile(t *testing.T) {
	vars, commands := configVars(t), helpCommands(t)
	d := readDockerfile(t)

	if !regexp.MustCompile(`^golang:1\.26\.\d+(-[a-z0-9.]+)?(@sha256:[0-9a-f]{64})?$`).MatchString(d.build.from) || d.build.name == "" {
		t.Errorf("build stage FROM %s AS %s: want golang:1.26.<patch> (pinned), named", d.build.from, d.build.name)
	}
	var build string
	for _, in := range d.build.all("RUN") {
		if strings.Contains(in.args, "go build") {
			build = in.args
		}
	}
	flags, out, ok := buildFlags(build)
	switch {
	case !ok:
		t.Fatalf("no `go build ... -o ...` in the build stage")
	case !strings.Contains(build, "CGO_ENABLED=0 go build") && dockerEnv(t, d.build)["CGO_ENABLED"] != "0":
		t.Errorf("the build is not CGO_ENABLED=0: %s", build)
	case !strings.Contains(flags, "-X "+versionVar+"=${VERSION}") || !strings.Contains(flags, "-X "+commitVar+"=${COMMIT}"):
		t.Errorf("go build flags = %s: want the VERSION and COMMIT build arguments stamped (-X %s=${VERSION} -X %s=${COMMIT})", flags, versionVar, commitVar)
	case unstamped(flags) != `-trimpath -ldflags "-s -w"`:
		t.Errorf("go build flags = %s, want -trimpath -ldflags \"-s -w\" (and the version stamps)", flags)
	}
	for _, arg := range []string{"VERSION", "COMMIT"} {
		if !slices.ContainsFunc(d.build.all("ARG"), func(in dockerInstr) bool { return strings.HasPrefix(in.args, arg) }) {
			t.Errorf("the build stage declares no ARG %s", arg)
		}
	}
	ci := readRepoFile(t, ".ci/run")
	ciBuild := ""
	for line := range strings.Lines(ci) {
		if strings.Contains(line, "CGO_ENABLED=0 go build") {
			ciBuild = line
		}
	}
	if ciFlags, _, ok := buildFlags(ciBuild); !ok || ciFlags != unstamped(flags) {
		t.Errorf(".ci/run builds %q, want CGO_ENABLED=0 go build %s, as the Dockerfile does", strings.TrimSpace(ciBuild), flags)
	}

	final := d.final
	if !regexp.MustCompile(`^gcr\.io/distroless/static(-debian\d+)?:nonroot(@sha256:[0-9a-f]{64})?$`).MatchString(final.from) && final.from != "scratch" {
		t.Errorf("runtime FROM %s: want distroless static nonroot (or scratch)", final.from)
	}
	copied := false
	for _, in := range final.all("COPY") {
		f := strings.Fields(in.args)
		if slices.Contains(f, "--from="+d.build.name) && slices.Contains(f, out) {
			copied = true
		}
	}
	if !copied {
		t.Errorf("the runtime stage does not COPY --from=%s %s", d.build.name, out)
	}
	if u, ok := final.last("USER"); !ok {
		t.Error("no USER: the image would run as whatever the base says")
	} else if user, _, _ := strings.Cut(u.args, ":"); user == "" || user == "0" || user == "root" {
		t.Errorf("USER %s: want a non-root user", u.args)
	}
	if ep, ok := final.last("ENTRYPOINT"); !ok || !slices.Equal(execForm(t, ep), []string{out}) {
		t.Errorf("ENTRYPOINT = %v, want [%q]", ep.args, out)
	}
	if cmd, ok := final.last("CMD"); !ok || !slices.Equal(execForm(t, cmd), []string{"serve"}) {
		t.Errorf("CMD = %v, want [\"serve\"]", cmd.args)
	}

	for name := range d.env {
		if !vars[name] {
			t.Errorf("the Dockerfile sets ENV %s, which config does not read", name)
		}
	}
	if addr := d.env["APP_ADDR"]; addr == "" || portOf(t, "APP_ADDR", addr) != d.port {
		t.Errorf("ENV APP_ADDR=%q and EXPOSE %s disagree", addr, d.port)
	} else if host, _, _ := net.SplitHostPort(addr); host != "0.0.0.0" && host != "" {
		t.Errorf("APP_ADDR %s listens on %s only: unreachable from outside the container", addr, host)
	}
	// Read-only root: whatever is written goes to APP_STORAGE, a volume.
	storage := d.env["APP_STORAGE"]
	volumes := ""
	for _, v := range final.all("VOLUME") {
		volumes += v.args
	}
	if storage == "" || !strings.Contains(volumes, `"`+storage+`"`) {
		t.Errorf("APP_STORAGE=%q is not a VOLUME (%s): the root filesystem may be read-only", storage, volumes)
	}
	if d.env["APP_ENV"] != config.EnvProduction {
		t.Errorf("APP_ENV=%q: the image is for production, which demands APP_KEY", d.env["APP_ENV"])
	}

	hc, ok := final.last("HEALTHCHECK")
	if !ok {
		t.Fatal("no HEALTHCHECK")
	}
	_, probe, ok := strings.Cut(hc.args, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %s: want HEALTHCHECK [options] CMD [...]", hc.args)
	}
	argv := execForm(t, dockerInstr{cmd: "HEALTHCHECK CMD", args: strings.TrimSpace(probe), line: hc.line})
	if argv[0] != out || len(argv) < 2 || !slices.Contains(commands, argv[1]) {
		t.Errorf("HEALTHCHECK runs %v: want %s and one of licensor's commands %v", argv, out, commands)
	}
}

// interpolate expands compose's ${NAME}, ${NAME:-default}, ${NAME-default},
// ${NAME:?message}, ${NAME?message} and $$ from vars; a required variable
// missing from vars fails the test.
func interpolate(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	ref := regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)
	return ref.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		p := ref.FindStringSubmatch(m)
		name, op, arg := p[1], p[2], p[3]
		v, set := vars[name]
		switch {
		case set && (v != "" || !strings.HasPrefix(op, ":")):
			return v
		case strings.HasSuffix(op, "-"):
			return arg
		case strings.HasSuffix(op, "?"):
			t.Fatalf("compose.yaml requires %s (%s): the test gives no value for it", name, arg)
		}
		return ""
	})
}

// composeEnv is a service's environment, interpolated.
func composeEnv(t *testing.T, svc map[string]any, vars map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	switch e := svc["environment"].(type) {
	case nil:
	case map[string]any:
		for k, v := range e {
			s, _ := v.(string)
			env[k] = interpolate(t, s, vars)
		}
	case []any:
		for _, item := range e {
			k, v, _ := strings.Cut(fmt.Sprint(item), "=")
			env[k] = interpolate(t, v, vars)
		}
	default:
		t.Fatalf("environment %T: want a mapping or a list", e)
	}
	return env
}

func strList(t *testing.T, what string, v any, vars map[string]string) []string {
	t.Helper()
	switch l := v.(type) {
	case nil:
		return nil
	case string:
		return strings.Fields(interpolate(t, l, vars))
	case []any:
		out := make([]string, len(l))
		for i, item := range l {
			s, ok := item.(string)
			if !ok {
				t.Fatalf("%s: item %d is %T, want a string", what, i, item)
			}
			out[i] = interpolate(t, s, vars)
		}
		return out
	}
	t.Fatalf("%s is %T, want a list", what, v)
	return nil
}

func mapOf(t *testing.T, what string, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want a mapping", what, v)
	}
	return m
}

// flagValue is the value after --name in argv.
func flagValue(argv []string, name string) string {
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// loadAs runs config.Load on an environment, in an empty directory.
func loadAs(t *testing.T, env map[string]string) config.Config {
	t.Helper()
	t.Chdir(t.TempDir())
	cfg, err := config.Load(func(name string) string { return env[name] })
	if err != nil {
		t.Fatalf("config.Load on %v: %v", env, err)
	}
	return cfg
}

// compose.yaml runs the image with settings config reads and accepts, the
// commands the binary has, on the ports it listens on; migrate runs before
// two serve replicas that share one key, issuer, database and vendor (the
// simulator); Prometheus scrapes every replica.
func TestDeployCompose(t *testing.T) {
	vars, commands := configVars(t), helpCommands(t)
	d := readDockerfile(t)
	doc, err := parseYAML(readRepoFile(t, "compose.yaml"))
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	services := mapOf(t, "services", mapOf(t, "compose.yaml", doc)["services"])
	// The values compose would take from the shell or .env.
	shell := map[string]string{"APP_KEY": config.EncodeKey(testKey)}

	// The services that run the licensor image.
	image := ""
	licensor := map[string]map[string]any{}
	for name, v := range services {
		svc := mapOf(t, "service "+name, v)
		if build, _ := svc["build"].(map[string]any); svc["build"] == "." || build != nil && build["context"] == "." {
			image, _ = svc["image"].(string)
			licensor[name] = svc
		}
	}
	for name, v := range services {
		if svc := v.(map[string]any); image != "" && svc["image"] == image {
			licensor[name] = svc
		}
	}
	// The image is built with its version: compose passes the build
	// arguments the Dockerfile stamps (VERSION, COMMIT), from the shell.
	for name, svc := range licensor {
		build, _ := svc["build"].(map[string]any)
		args, _ := build["args"].(map[string]any)
		if build == nil {
			continue // a service that reuses the image another builds
		}
		for _, arg := range []string{"VERSION", "COMMIT"} {
			if v, _ := args[arg].(string); !strings.Contains(v, "${LICENSOR_"+arg) {
				t.Errorf("service %s builds the image without its %s build argument from LICENSOR_%s (args %v)", name, arg, arg, args)
			}
		}
	}
	command := map[string]string{} // service → licensor command
	for name, svc := range licensor {
		argv := strList(t, name+".command", svc["command"], shell)
		if len(argv) == 0 || !slices.Contains(commands, argv[0]) {
			t.Errorf("service %s runs %v: want one of licensor's commands %v", name, argv, commands)
			continue
		}
		command[argv[0]] = name
		for k := range composeEnv(t, svc, shell) {
			if !vars[k] {
				t.Errorf("service %s sets %s, which config does not read", name, k)
			}
		}
		if svc["read_only"] != "true" || !slices.Contains(strList(t, name+".tmpfs", svc["tmpfs"], shell), "/tmp") {
			t.Errorf("service %s: want read_only: true with a tmpfs on /tmp", name)
		}
		// The image's HEALTHCHECK probes serve's /readyz: others turn it off.
		if argv[0] != "serve" {
			if hc, _ := svc["healthcheck"].(map[string]any); hc["disable"] != "true" {
				t.Errorf("service %s (%s) keeps the image's HEALTHCHECK, which probes serve's /readyz", name, argv[0])
			}
		}
	}
	for _, want := range []string{"serve", "migrate", "vendor-sim"} {
		if command[want] == "" {
			t.Fatalf("no service runs licensor %s (services %v)", want, command)
		}
	}
	serveName, migrateName, simName := command["serve"], command["migrate"], command["vendor-sim"]
	serveSvc, migrateSvc, simSvc := licensor[serveName], licensor[migrateName], licensor[simName]

	// Each process's whole environment: the image's ENV under the service's.
	envOf := func(svc map[string]any) map[string]string {
		env := map[string]string{}
		for k, v := range d.env {
			env[k] = v
		}
		for k, v := range composeEnv(t, svc, shell) {
			env[k] = v
		}
		return env
	}
	serveEnv, migrateEnv := envOf(serveSvc), envOf(migrateSvc)
	serveCfg, migrateCfg := loadAs(t, serveEnv), loadAs(t, migrateEnv)

	// One key, one issuer, one database, one vendor.
	for _, k := range []string{"APP_ENV", "APP_KEY", "APP_URL", "DB_CONNECTION", "DB_HOST", "DB_PORT", "DB_DATABASE",
		"DB_USERNAME", "DB_PASSWORD", "DB_URL", "VENDOR_DRIVER", "VENDOR_URL", "VENDOR_TOKEN"} {
		if serveEnv[k] != migrateEnv[k] {
			t.Errorf("%s: serve has %q, migrate %q: they must share it", k, serveEnv[k], migrateEnv[k])
		}
	}
	if serveCfg.Env != config.EnvProduction || serveCfg.KeySource != "env" {
		t.Errorf("serve runs APP_ENV=%s with its key from %s: want production with APP_KEY", serveCfg.Env, serveCfg.KeySource)
	}
	deploy, _ := serveSvc["deploy"].(map[string]any)
	if deploy["replicas"] != "2" {
		t.Errorf("serve: deploy.replicas = %v, want 2", deploy["replicas"])
	}
	if g, err := time.ParseDuration(fmt.Sprint(serveSvc["stop_grace_period"])); err != nil || g <= serveCfg.ShutdownTimeout {
		t.Errorf("serve: stop_grace_period %v, want longer than APP_SHUTDOWN_TIMEOUT (%v), or requests in flight are killed",
			serveSvc["stop_grace_period"], serveCfg.ShutdownTimeout)
	}

	// Ports: APP_ADDR is EXPOSE, and every published port maps to it.
	appPort := portOf(t, "APP_ADDR", serveCfg.Addr)
	if appPort != d.port {
		t.Errorf("serve listens on %s, the image EXPOSEs %s", serveCfg.Addr, d.port)
	}
	ports := strList(t, serveName+".ports", serveSvc["ports"], shell)
	if len(ports) == 0 {
		t.Errorf("serve publishes no port")
	}
	for _, p := range ports {
		parts := strings.Split(strings.TrimSuffix(p, "/tcp"), ":")
		if container := parts[len(parts)-1]; container != appPort {
			t.Errorf("serve publishes %s: its container port is not APP_ADDR's %s", p, appPort)
		}
	}
	metricsPort := appPort
	switch {
	case serveCfg.MetricsAddr != "":
		metricsPort = portOf(t, "METRICS_ADDR", serveCfg.MetricsAddr)
	case !serveCfg.MetricsOnAPI():
		t.Errorf("serve runs APP_ENV=%s without METRICS_ADDR: it serves no /metrics for Prometheus to scrape", serveCfg.Env)
	}

	// migrate after a healthy MariaDB; serve after migrate succeeded.
	dependsOn := func(svc map[string]any, on string) string {
		dep, _ := svc["depends_on"].(map[string]any)
		cond, _ := dep[on].(map[string]any)
		s, _ := cond["condition"].(string)
		return s
	}
	if serveCfg.DB.Connection != "mysql" {
		t.Fatalf("serve uses %s: two replicas need MySQL/MariaDB", serveCfg.DB.Connection)
	}
	db, ok := services[serveCfg.DB.Host].(map[string]any)
	if !ok {
		t.Fatalf("DB_HOST %s is no service", serveCfg.DB.Host)
	}
	if db["healthcheck"] == nil {
		t.Errorf("service %s has no healthcheck, so migrate cannot wait for it", serveCfg.DB.Host)
	}
	if got := dependsOn(migrateSvc, serveCfg.DB.Host); got != "service_healthy" {
		t.Errorf("migrate depends on %s with condition %q, want service_healthy", serveCfg.DB.Host, got)
	}
	if got := dependsOn(serveSvc, migrateName); got != "service_completed_successfully" {
		t.Errorf("serve depends on %s with condition %q, want service_completed_successfully", migrateName, got)
	}
	if restart := fmt.Sprint(migrateSvc["restart"]); restart != "no" {
		t.Errorf("migrate restart: %s, want \"no\": it runs once", restart)
	}
	dbEnv := composeEnv(t, db, shell)
	for k, want := range map[string]string{"MARIADB_DATABASE": serveCfg.DB.Database, "MARIADB_USER": serveCfg.DB.Username,
		"MARIADB_PASSWORD": serveCfg.DB.Password} {
		if dbEnv[k] != want {
			t.Errorf("%s: %s=%q, but serve logs in with %q", serveCfg.DB.Host, k, dbEnv[k], want)
		}
	}
	if serveCfg.DB.Port != 3306 {
		t.Errorf("DB_PORT %d: MariaDB listens on 3306 in its container", serveCfg.DB.Port)
	}

	// The vendor is the simulator, on the address and token it serves with.
	simArgv := strList(t, simName+".command", simSvc["command"], shell)
	vendor, err := url.Parse(serveCfg.Vendor.URL)
	if serveCfg.Vendor.Driver != "http" || err != nil {
		t.Fatalf("serve's vendor: driver %s, URL %s: want the http driver", serveCfg.Vendor.Driver, serveCfg.Vendor.URL)
	}
	if vendor.Hostname() != simName || vendor.Port() != portOf(t, "vendor-sim --addr", flagValue(simArgv, "--addr")) {
		t.Errorf("VENDOR_URL %s does not reach %s %v", serveCfg.Vendor.URL, simName, simArgv)
	}
	if tok := flagValue(simArgv, "--token"); tok == "" || tok != serveCfg.Vendor.Token {
		t.Errorf("vendor-sim --token %q, serve's VENDOR_TOKEN %q: they must match", tok, serveCfg.Vendor.Token)
	}
	if got := dependsOn(serveSvc, simName); got == "" {
		t.Errorf("serve does not depend on %s", simName)
	}
	if !slices.Equal([]string{migrateCfg.Vendor.URL}, []string{serveCfg.Vendor.URL}) {
		t.Errorf("migrate's vendor URL differs from serve's")
	}

	// Prometheus scrapes /metrics on every serve replica.
	var promFile string
	for name, v := range services {
		for _, vol := range strList(t, name+".volumes", v.(map[string]any)["volumes"], shell) {
			if src, rest, ok := strings.Cut(vol, ":"); ok && strings.HasPrefix(rest, "/etc/prometheus/prometheus.yml") {
				promFile = src
			}
		}
	}
	if promFile == "" {
		t.Fatal("no service mounts a prometheus.yml")
	}
	prom, err := parseYAML(readRepoFile(t, promFile))
	if err != nil {
		t.Fatalf("%s: %v", promFile, err)
	}
	scraped := false
	for _, sc := range mapOf(t, promFile, prom)["scrape_configs"].([]any) {
		job := mapOf(t, "scrape config", sc)
		if path, _ := job["metrics_path"].(string); path != "" && path != "/metrics" {
			continue
		}
		for _, dns := range asList(job["dns_sd_configs"]) {
			m := mapOf(t, "dns_sd_config", dns)
			names := strList(t, "names", m["names"], nil)
			if slices.Contains(names, serveName) && m["port"] == metricsPort && (m["type"] == nil || m["type"] == "A") {
				scraped = true
			}
		}
		for _, st := range asList(job["static_configs"]) {
			for _, target := range strList(t, "targets", mapOf(t, "static_config", st)["targets"], nil) {
				if host, port, _ := net.SplitHostPort(target); strings.HasPrefix(host, serveName) && port == metricsPort {
					scraped = true
				}
			}
		}
	}
	if !scraped {
		t.Errorf("%s scrapes no %s replica on the metrics port %s", promFile, serveName, metricsPort)
	}
	if metricsPort != appPort {
		for _, p := range ports {
			if strings.HasSuffix(p, ":"+metricsPort) {
				t.Errorf("serve publishes the metrics port: %s", p)
			}
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// The image's HEALTHCHECK as the container runs it: the binary alone, with
// the container's environment, against a real serve; 0 while it is ready,
// 1 once it is gone.
func TestDeployHealthcheckAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	addr := testkit.FreeAddr(t)
	storage := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"APP_ENV=testing", "APP_KEY=" + config.EncodeKey(testKey), "APP_ADDR=" + addr, "APP_STORAGE=" + storage,
	}
	serve := start(t, env, "serve")
	waitFor(t, "http://"+addr+"/healthz", "", 200)
	// The health check sees only the address, as the image's ENV gives it:
	// 0.0.0.0 is asked on the loopback.
	probeEnv := []string{"APP_ADDR=0.0.0.0:" + portOf(t, "addr", addr), "APP_ENV=production"}
	out := runCmd(t, probeEnv, "healthcheck")
	if !strings.Contains(out, "/readyz: 200") {
		t.Errorf("healthcheck printed %q, want /readyz: 200", out)
	}
	_ = serve.cmd.Process.Signal(os.Interrupt)
	_ = serve.cmd.Wait()
	cmd := exec.Command(binary(t), "healthcheck", "--timeout", "2s")
	cmd.Env, cmd.Dir = probeEnv, t.TempDir()
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("healthcheck with serve stopped: %v, want exit 1", err)
	}
}
