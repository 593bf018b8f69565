package tests

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A hostile consumer registers 16 endpoints at a listener that accepts
// connections and never answers, and creates 50 licenses: 800 deliveries,
// each of which would hold a sender for WEBHOOK_TIMEOUT (10 s). Another
// consumer then creates 20 licenses, one after another: each one's webhook
// reaches its receiver within 5 s of the create's answer (the p99 of 20 is
// their slowest), and each event is in its feed within 2 s, on a real
// serve process with the default delivery settings.
func TestOneConsumersTarpitDelaysNoOtherConsumersWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a licensor process (skipped under -short)")
	}
	testdb.Each(t, func(t *testing.T, db *testdb.DB) {
		tarpit := newTarpit(t)
		good := newHookReceiver(t)
		env := fairnessEnv(t, db)
		urls, _ := startServes(t, env, 1)
		base := urls[0]
		abilities := "licenses:read,licenses:write,webhooks:manage"
		hostile := strings.TrimSpace(runCmd(t, env, "token", "issue", "--consumer", "hostile", "--abilities", abilities))
		victim := strings.TrimSpace(runCmd(t, env, "token", "issue", "--consumer", "victim", "--abilities", abilities))

		for i := range 16 {
			mustSend(t, base+"/api/webhook-endpoints", hostile, fmt.Sprintf(`{"url":"%s/h%d"}`, tarpit, i), http.StatusCreated)
		}
		mustSend(t, base+"/api/webhook-endpoints", victim, fmt.Sprintf(`{"url":"%s/hooks"}`, good.srv.URL), http.StatusCreated)
		for i := range 50 {
			mustSend(t, base+"/api/licenses", hostile, fmt.Sprintf(`{"name":"H","domain":"hostile-%d.test"}`, i), http.StatusCreated)
		}
		// The hostile backlog is being worked before the victim's first change.
		testkit.Eventually(t, 20*time.Second, func() bool { return tarpit.connections() >= 1 },
			"no delivery reached the tarpit")

		var webhook, feed []time.Duration
		for i := range 20 {
			domain := fmt.Sprintf("victim-%d.test", i)
			mustSend(t, base+"/api/licenses", victim, fmt.Sprintf(`{"name":"V","domain":%q}`, domain), http.StatusCreated)
			answered := time.Now()
			inFeed := false
			testkit.Eventually(t, 60*time.Second, func() bool {
				if !inFeed {
					if code, _, body := send(base+"/api/events?per_page=100", http.MethodGet, victim, "", ""); code == http.StatusOK &&
						strings.Contains(body, domain) {
						inFeed = true
						feed = append(feed, time.Since(answered))
					}
				}
				return inFeed
			}, "%s never reached the feed", domain)
			at := good.await(t, domain, 60*time.Second)
			webhook = append(webhook, at.Sub(answered))
		}
		slices.Sort(webhook)
		slices.Sort(feed)
		t.Logf("%s: victim's webhook after its create: median %v, p99 %v; feed: median %v, p99 %v; tarpit connections %d",
			db.Dialect, webhook[len(webhook)/2], webhook[len(webhook)-1], feed[len(feed)/2], feed[len(feed)-1], tarpit.connections())
		if p99 := webhook[len(webhook)-1]; p99 > 5*time.Second {
			t.Errorf("the victim's webhooks took up to %v (p99 of %d), want within 5s: %v", p99, len(webhook), webhook)
		}
		if p99 := feed[len(feed)-1]; p99 > 2*time.Second {
			t.Errorf("the victim's events took up to %v to reach its feed, want within 2s: %v", p99, feed)
		}
	})
}

// fairnessEnv is a serve on db with the fake vendor, the delivery settings
// left at their defaults, and loopback endpoints allowed (the test's
// receivers listen there).
func fairnessEnv(t *testing.T, db *testdb.DB) []string {
	return faultEnv(t, db, "", "VENDOR_DRIVER=fake", "WEBHOOK_ALLOW_PRIVATE=true", "LOG_LEVEL=warn")
}

// mustSend sends body to url with token and fails the test unless the
// answer is want.
func mustSend(t *testing.T, url, token, body string, want int) string {
	t.Helper()
	code, _, got := send(url, http.MethodPost, token, "", body)
	if code != want {
		t.Fatalf("POST %s %s = %d %s, want %d", url, body, code, got, want)
	}
	return got
}

// tarpit accepts connections and never answers; it counts them.
type tarpit struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newTarpit(t *testing.T) *tarpit {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tarpit{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tp.mu.Lock()
			tp.conns = append(tp.conns, c)
			tp.mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }() // read, never answer
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		tp.mu.Lock()
		defer tp.mu.Unlock()
		for _, c := range tp.conns {
			_ = c.Close()
		}
	})
	return tp
}

func (tp *tarpit) String() string { return "http://" + tp.ln.Addr().String() }

func (tp *tarpit) connections() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.conns)
}
