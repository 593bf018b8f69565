package console

import (
	"bytes"
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/app/vendorclient"
	"github.com/licensor-api/licensor/config"
)

// TestVendorSimRidesOutA429Burst runs `licensor vendor-sim --429-burst 2
// --retry-after 1` and drives it with the http driver: one create succeeds on
// the third vendor call, after two waits of the second asked.
func TestVendorSimRidesOutA429Burst(t *testing.T) {
	addr := freeAddr(t)
	stderr := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	args := []string{"--addr", addr, "--token", "sim-token", "--429-burst", "2", "--retry-after", "1"}
	go func() {
		done <- vendorSim(ctx, env{args: args, getenv: getenvOf(nil), stdout: &bytes.Buffer{}, stderr: stderr})
	}()
	waitListening(t, addr, done)

	var mu sync.Mutex
	var waits []time.Duration
	var statuses []int
	sleep := func(ctx context.Context, wait time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, wait)
		return ctx.Err()
	}
	observe := func(_ string, status int) {
		mu.Lock()
		defer mu.Unlock()
		statuses = append(statuses, status)
	}
	d, err := vendorclient.NewHTTP(config.Vendor{Driver: "http", URL: "http://" + addr, Token: "sim-token",
		Timeout: 5 * time.Second, RetryAttempts: 3, RetryBase: time.Second, RetryMaxWait: 10 * time.Second}, nil,
		vendorclient.WithSleep(sleep), vendorclient.WithObserver(observe, nil))
	if err != nil {
		t.Fatal(err)
	}

	if _, err := d.CreateSite(ctx, "Acme", "acme.test"); err != nil {
		t.Fatalf("CreateSite through the burst: %v", err)
	}
	mu.Lock()
	if want := []int{429, 429, 201}; !reflect.DeepEqual(statuses, want) {
		t.Errorf("vendor answers = %v, want %v", statuses, want)
	}
	if want := []time.Duration{time.Second, time.Second}; !reflect.DeepEqual(waits, want) {
		t.Errorf("waits = %v, want %v", waits, want)
	}
	mu.Unlock()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("vendor-sim returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("vendor-sim did not stop after its context was cancelled")
	}
	if !strings.Contains(stderr.String(), "addr=http://"+addr) {
		t.Errorf("vendor-sim did not log its address:\n%s", stderr)
	}
}

func TestVendorSimUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"},
		{"extra"},
		{"--drop-mode", "sideways"},
		{"--5xx-rate", "2"},
		{"--429-burst", "-1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			err := vendorSim(context.Background(), env{args: args, getenv: getenvOf(nil), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}})
			var u usageError
			if !errors.As(err, &u) {
				t.Errorf("vendorSim(%q) = %v, want a usage error (exit 2)", args, err)
			}
		})
	}
}

// waitListening polls addr until it accepts a connection, the command
// fails, or a deadline passes.
func waitListening(t *testing.T, addr string, done <-chan error) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for ; time.Now().Before(deadline); <-tick.C {
		select {
		case err := <-done:
			t.Fatalf("vendor-sim exited early: %v", err)
		default:
		}
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return
		}
	}
	t.Fatalf("%s did not accept connections within the deadline", addr)
}
