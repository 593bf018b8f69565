package tests

// The history checker's fault schedule: seeded, it strikes every few
// seconds with one of kill -9 or SIGTERM of a serve (restarted on its
// address), SIGSTOP then SIGCONT of a serve, the serves' MariaDB
// connections killed, the vendor-sim killed and restarted with its sites,
// or the vendor's faults changed.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"syscall"
	"time"
)

// robustVendorFaults are the fault profiles POST /_sim/faults sets: each
// adds its knobs to those in force (a DELETE /_sim/faults clears them all
// first, one time in four).
var robustVendorFaults = []string{
	`{"5xx_rate":0.1,"drop_rate":0.05,"fault_phase":"random","drop_mode":"hang"}`,
	`{"drop_creates":3,"drop_mode":"5xx-after-commit"}`,
	`{"drop_creates":3,"drop_mode":"hang","fault_phase":"after"}`,
	`{"drop_rate":0.15,"drop_mode":"hang","fault_phase":"after"}`,
	`{"drop_deletes":2,"drop_mode":"close"}`,
	`{"429_burst":3,"retry_after":0}`,
	`{"latency":"300ms","jitter":"200ms"}`,
	`{"5xx_rate":0.3,"fault_phase":"after","drop_mode":"5xx-after-commit"}`,
}

// faults runs the schedule until the traffic ends.
func (r *robustRun) faults(until time.Time) {
	rng := rand.New(rand.NewPCG(r.seed, 7))
	kinds := []string{"kill -9", "sigterm", "sigstop", "vendor-sim restart", "vendor faults", "vendor faults", "vendor faults"}
	if r.isMySQL() {
		kinds = append(kinds, "db connections killed", "db connections killed")
	}
	for {
		wait := time.Duration(1500+rng.IntN(2500)) * time.Millisecond
		kind, si, arg := kinds[rng.IntN(len(kinds))], rng.IntN(len(r.serves)), rng.IntN(1<<30)
		<-time.After(wait) // when the next fault strikes: the schedule, not a wait for a state
		if time.Now().After(until) {
			return
		}
		if err := r.inject(kind, si, arg); err != nil {
			r.note("fault %s: %v", kind, err)
			continue
		}
		r.mu.Lock()
		r.stats.faults[kind]++
		r.mu.Unlock()
	}
}

// inject makes one fault strike.
func (r *robustRun) inject(kind string, si, arg int) error {
	s := r.serves[si]
	switch kind {
	case "kill -9", "sigterm":
		sig := syscall.SIGKILL
		if kind == "sigterm" {
			sig = syscall.SIGTERM
		}
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		_ = p.cmd.Process.Signal(sig)
		_ = p.cmd.Wait()
		s.mu.Lock()
		s.deaths = append(s.deaths, r.now())
		s.mu.Unlock()
		return r.startServe(s)
	case "sigstop":
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		<-time.After(time.Duration(300+arg%2000) * time.Millisecond) // how long it stays stopped
		return p.cmd.Process.Signal(syscall.SIGCONT)
	case "db connections killed":
		return r.killConnections()
	case "vendor-sim restart":
		sim := r.currentSim()
		_ = sim.proc.cmd.Process.Signal(syscall.SIGKILL)
		_ = sim.proc.cmd.Wait()
		r.mu.Lock()
		r.stats.notes = append(r.stats.notes, fmt.Sprintf("vendor-sim restarted at %s", time.Duration(r.now()).Round(time.Millisecond)))
		r.mu.Unlock()
		return r.startSim()
	case "vendor faults":
		if arg%4 == 0 {
			if _, err := r.simCall(http.MethodDelete, "/_sim/faults", "", http.StatusOK); err != nil {
				return err
			}
		}
		_, err := r.simCall(http.MethodPost, "/_sim/faults", robustVendorFaults[arg%len(robustVendorFaults)], http.StatusOK)
		return err
	}
	return fmt.Errorf("no such fault %q", kind)
}

// killConnections kills every MariaDB connection to the run's database
// but the one that kills them (information_schema.PROCESSLIST): the
// serves', the reconcile command's, and the test's own idle ones.
func (r *robustRun) killConnections() error {
	sqlDB, err := r.db.Gorm.DB()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()")
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		_, _ = conn.ExecContext(ctx, fmt.Sprintf("KILL %d", id)) // one that ended meanwhile is no error worth the name
	}
	r.mu.Lock()
	r.stats.faults["db connections (each)"] += len(ids)
	r.mu.Unlock()
	return nil
}
