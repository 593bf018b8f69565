package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// domainSeq numbers the domains of the create cases, so that no two
// requests of a run ask for the same domain.
var domainSeq atomic.Int64

// runTag keeps this run's domains apart from any earlier run's.
var runTag = randomHex(4)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// newKey is a fresh Idempotency-Key in UUID form (36 characters, which is
// what the Fiber middleware's default validator wants).
func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// nextDomain is a domain no request of this run has asked for.
func nextDomain() string {
	return "c" + strconv.FormatInt(domainSeq.Add(1), 10) + "-" + runTag + ".bench.test"
}

// licenseBody is a create's JSON body.
func licenseBody(name, domain string) []byte {
	b, _ := json.Marshal(map[string]string{"name": name, "domain": domain}) // strings always encode
	return b
}

// apiRequest builds an authenticated request.
func apiRequest(ctx context.Context, method, url, token string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// fixedPost sends the same POST (one Idempotency-Key, one body) every time:
// a replay once the first has completed.
func fixedPost(url, token, key string, body []byte) requestFunc {
	return func(ctx context.Context) (*http.Request, error) {
		req, err := apiRequest(ctx, http.MethodPost, url, token, body)
		if err == nil {
			req.Header.Set("Idempotency-Key", key)
		}
		return req, err
	}
}

// get sends the same GET every time.
func get(url, token string) requestFunc {
	return func(ctx context.Context) (*http.Request, error) {
		return apiRequest(ctx, http.MethodGet, url, token, nil)
	}
}

// creates sends a create for a new domain every time, with a new
// Idempotency-Key when keyed.
func creates(url, token string, keyed bool) requestFunc {
	return func(ctx context.Context) (*http.Request, error) {
		req, err := apiRequest(ctx, http.MethodPost, url, token, licenseBody("Bench", nextDomain()))
		if err == nil && keyed {
			req.Header.Set("Idempotency-Key", newKey())
		}
		return req, err
	}
}

// created is the answer to a create made during setup.
type created struct {
	Status   int
	Body     []byte
	Replayed bool
	ID       string // data.id
}

// create sends one create (keyed when key is not empty) and checks that it
// answered 201 or 200.
func create(ctx context.Context, baseURL, token, key, domain string) (created, error) {
	req, err := apiRequest(ctx, http.MethodPost, baseURL+"/api/licenses", token, licenseBody("Bench", domain))
	if err != nil {
		return created{}, err
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return created{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return created{}, err
	}
	c := created{Status: resp.StatusCode, Body: body, Replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if c.Status != http.StatusCreated && c.Status != http.StatusOK {
		return c, fmt.Errorf("create %s: %d %s", domain, c.Status, body)
	}
	var doc struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Data.ID == "" {
		return c, fmt.Errorf("create %s: no data.id in %s", domain, body)
	}
	c.ID = doc.Data.ID
	return c, nil
}
