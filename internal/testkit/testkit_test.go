package testkit_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	clk := testkit.NewClock(t0)
	if got := clk.Now(); !got.Equal(t0) {
		t.Fatalf("Now() = %v, want %v", got, t0)
	}
	clk.Advance(90 * time.Second)
	if got, want := clk.Now(), t0.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("after Advance: Now() = %v, want %v", got, want)
	}
	later := t0.Add(24 * time.Hour)
	clk.Set(later)
	if got := clk.Now(); !got.Equal(later) {
		t.Errorf("after Set: Now() = %v, want %v", got, later)
	}
	if got := clk.Waits(); len(got) != 0 {
		t.Errorf("Waits() = %v before any Sleep, want none", got)
	}
}

// Sleep records the wait and moves the clock on at once; on a done context
// it returns the context's error and neither records nor moves.
func TestClockSleepRecordsAndAdvances(t *testing.T) {
	clk := testkit.NewClock(t0)
	for _, d := range []time.Duration{time.Second, 3 * time.Second} {
		if err := clk.Sleep(context.Background(), d); err != nil {
			t.Fatalf("Sleep(%s) = %v", d, err)
		}
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clk.Sleep(done, time.Hour); err != context.Canceled {
		t.Errorf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if got, want := clk.Now(), t0.Add(4*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
	waits := clk.Waits()
	if want := []time.Duration{time.Second, 3 * time.Second}; !reflect.DeepEqual(waits, want) {
		t.Errorf("Waits() = %v, want %v", waits, want)
	}
	waits[0] = 0
	if got := clk.Waits(); got[0] != time.Second {
		t.Error("Waits() hands out the clock's own slice")
	}
}

// Readers and movers of one clock race without a data race (go test -race).
func TestClockIsSafeToShare(t *testing.T) {
	clk := testkit.NewClock(t0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				clk.Advance(time.Second)
				_ = clk.Now()
				_ = clk.Sleep(context.Background(), time.Second)
			}
		})
	}
	wg.Wait()
	if got, want := clk.Now(), t0.Add(800*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
	if n := len(clk.Waits()); n != 400 {
		t.Errorf("%d waits, want 400", n)
	}
}

// Writers of one buffer each keep their lines whole (and race-free).
func TestBufferIsSafeToShare(t *testing.T) {
	var buf testkit.Buffer
	var w io.Writer = &buf
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				fmt.Fprintf(w, "writer %d line %d\n", g, i)
				_ = buf.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 200 {
		t.Fatalf("%d lines, want 200", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "writer ") {
			t.Errorf("a line torn by a concurrent write: %q", l)
		}
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	if !testkit.Poll(10*time.Second, func() bool { calls++; return calls == 3 }) {
		t.Error("Poll gave up on a condition that held on the third call")
	}
	if calls != 3 {
		t.Errorf("cond called %d times, want 3: Poll stops once it holds", calls)
	}

	calls = 0
	began := time.Now()
	if testkit.Poll(30*time.Millisecond, func() bool { calls++; return false }) {
		t.Error("Poll reported a condition that never held")
	}
	if took := time.Since(began); took < 30*time.Millisecond {
		t.Errorf("Poll gave up after %s, before its deadline", took)
	}
	if calls < 2 {
		t.Errorf("cond called %d times, want it retried until the deadline", calls)
	}
}

// fatalT records what Eventually would fail the test with.
type fatalT struct {
	testing.TB
	failed string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestEventually(t *testing.T) {
	f := &fatalT{TB: t}
	testkit.Eventually(f, time.Second, func() bool { return true }, "holds at once")
	if f.failed != "" {
		t.Errorf("a condition that holds failed the test: %s", f.failed)
	}
	testkit.Eventually(f, 10*time.Millisecond, func() bool { return false }, "the %s", "widget")
	if want := "the widget: not within 10ms"; f.failed != want {
		t.Errorf("failed with %q, want %q", f.failed, want)
	}
}

// FreeAddr is a loopback address nothing listens on, free to listen on.
func TestFreeAddr(t *testing.T) {
	addr := testkit.FreeAddr(t)
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("FreeAddr() = %q (%v), want 127.0.0.1:port", addr, err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("something listens on %s", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on the free address: %v", err)
	}
	ln.Close()
}
