package tests

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP proxy between the app and its database, so a test can cut
// the connection (every socket closed, new ones refused), freeze it (bytes
// stop flowing; sockets stay open) or slow it (each chunk held a while),
// then restore it.
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu     sync.Mutex
	state  string // "up", "cut" or "frozen"
	conns  []net.Conn
	thawed chan struct{} // closed when a freeze ends
	delay  time.Duration // each chunk's wait while slowed
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target, state: "up", thawed: make(chan struct{})}
	close(p.thawed)
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		p.Restore() // let frozen copies end
		p.wg.Wait()
	})
	return p
}

// Addr is where the app connects instead of the database.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.state == "cut" {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(up, c) })
		p.wg.Go(func() { p.pipe(c, up) })
	}
}

// pipe copies src to dst in chunks, waiting while the proxy is frozen.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thawed, delay := p.thawed, p.delay
			p.mu.Unlock()
			<-thawed
			if delay > 0 {
				<-time.After(delay) // the slowness simulated, not a wait for the test
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Cut closes every connection and refuses new ones: the database is gone.
func (p *proxy) Cut() {
	p.mu.Lock()
	p.state = "cut"
	p.mu.Unlock()
	p.closeAll()
}

// Freeze stops the bytes, leaving the sockets open: the database hangs.
func (p *proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != "frozen" {
		p.state, p.thawed = "frozen", make(chan struct{})
	}
}

// Slow holds each chunk, either way, for d before passing it on: the
// database answers, late.
func (p *proxy) Slow(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Restore lets connections through again (a frozen one carries on) at full
// speed.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == "frozen" {
		close(p.thawed)
	}
	p.state, p.delay = "up", 0
}
