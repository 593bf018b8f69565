package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/licensor-api/licensor/app/webhooks"
)

// The consumers' webhook endpoints: in process, behind the dispatcher's
// transport (no socket), each consumer's registered at the template. They
// answer as the schedule says (opHook's outcome), and keep every delivery
// they received.

// hookOutcomes are how the endpoints answer during one opHook pass.
var hookOutcomes = []string{"answer 204", "answer 500", "lose the answer"}

// hookURL is the consumer's endpoint (never dialled: see hookSink).
func hookURL(consumer string) string { return "http://127.0.0.1:9/hooks/" + consumer }

// hookModeKey carries, on a pass's context, how the endpoints answer it.
type hookModeKey struct{}

// received is one delivery an endpoint received.
type received struct {
	consumer string
	body     string
}

// hookSink is every endpoint: an http.RoundTripper the dispatcher posts to.
type hookSink struct {
	mu  sync.Mutex
	got map[string][]received // by the event's id (Licensor-Event-Id)
}

func newHookSink() *hookSink { return &hookSink{got: map[string][]received{}} }

// errLost is a delivery whose answer was lost on the way back.
var errLost = errors.New("sim: the endpoint's answer was lost")

// RoundTrip receives one delivery.
func (h *hookSink) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	mode, _ := req.Context().Value(hookModeKey{}).(int)
	if mode != 1 { // a 500 is an endpoint that refused it: not received
		h.mu.Lock()
		id := req.Header.Get(webhooks.EventIDHeader)
		h.got[id] = append(h.got[id], received{consumer: strings.TrimPrefix(req.URL.Path, "/hooks/"), body: string(body)})
		h.mu.Unlock()
	}
	switch mode {
	case 1:
		return answerOf(req, http.StatusInternalServerError), nil
	case 2:
		return nil, errLost
	}
	return answerOf(req, http.StatusNoContent), nil
}

func answerOf(req *http.Request, status int) *http.Response {
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(nil)), Request: req}
}

// receipts is what the endpoints received of the event id.
func (h *hookSink) receipts(id string) []received {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]received(nil), h.got[id]...)
}

// hookPass dispatches the committed events and delivers what is due, on
// process p, the endpoints answering as mode says.
func hookPass(p *process, mode int) (string, error) {
	ctx := context.WithValue(p.ctx, hookModeKey{}, mode)
	n, err := p.app.Webhooks.Dispatch(ctx)
	if err != nil {
		return "", fmt.Errorf("dispatch: %w", err)
	}
	d, err := p.app.Webhooks.DeliverDue(ctx)
	return fmt.Sprintf("dispatched %d, attempted %d", n, d), err
}
