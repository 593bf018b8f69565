package testkit

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address that nothing listens on (a port the
// system just handed out and took back), for a server the test is about to
// start there, or for a connection that must be refused.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
