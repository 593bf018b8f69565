package console

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/licensor-api/licensor/internal/testkit"
)

// A client that trickles its body slower than APP_READ_TIMEOUT is cut off,
// while other clients are served meanwhile.
func TestSlowBodyIsCutOffWhileOthersAreServed(t *testing.T) {
	t.Chdir(t.TempDir())
	addr := testkit.FreeAddr(t)
	stop := startServe(t, addr, getenvOf(map[string]string{"APP_ADDR": addr, "APP_READ_TIMEOUT": "1s"}), &testkit.Buffer{})
	t.Cleanup(func() { stop() })

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/licenses HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr)
	began := time.Now()
	closed := make(chan error, 1)
	go func() { // the server's answer, if any, then the end of the connection
		_, err := io.Copy(io.Discard, bufio.NewReader(conn))
		closed <- err
	}()
	tick := time.NewTicker(200 * time.Millisecond) // one byte every 200ms: 1000 bytes would take 200s
	defer tick.Stop()
	for {
		select {
		case <-closed:
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("the slow body held its connection %v", took)
			}
			return
		case <-tick.C:
			conn.Write([]byte(" ")) // fails once the server has closed its end; the read above tells
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("another client was not served meanwhile: %v", err)
			}
			resp.Body.Close()
		case <-time.After(10 * time.Second):
			t.Fatal("the slow body was never cut off")
		}
	}
}
