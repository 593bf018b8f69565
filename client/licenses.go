package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// License is a license as the API shows it.
type License struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Domain       string    `json:"domain"`
	LicenseKey   string    `json:"license_key"`
	Status       string    `json:"status"`
	VendorSiteID string    `json:"vendor_site_id"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`

	// Created and Replayed are set by CreateLicense only. Created: the
	// intent made this license (201), on this attempt or an earlier one;
	// false: the consumer already held it for the domain (200). Replayed:
	// the answer is the stored outcome of an earlier attempt with the same
	// key (Idempotent-Replayed: true).
	Created  bool `json:"-"`
	Replayed bool `json:"-"`
}

// Page is one page of ListLicenses, newest license first.
type Page struct {
	Licenses    []License
	CurrentPage int
	PerPage     int
	Total       int
	LastPage    int
}

// CreateLicenseInput is what CreateLicense asks for.
type CreateLicenseInput struct {
	Name   string
	Domain string
	// IdempotencyKey names the intent. Empty: CreateLicense makes a new key
	// for this call. Give one (see NewIdempotencyKey) to carry an intent
	// across calls or processes, e.g. to pick up an outcome that was still
	// pending when a call gave up; a corrected request needs a new key.
	IdempotencyKey string
}

// ErrInvalidKey is CreateLicense's error for an IdempotencyKey the API would
// refuse: it must be 1 to 255 visible ASCII characters.
var ErrInvalidKey = errors.New("the idempotency key must be 1 to 255 visible ASCII characters")

// NewIdempotencyKey returns a new random key: 128 bits from crypto/rand, in
// hex.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24: it crashes the program instead
	return hex.EncodeToString(b[:])
}

// CreateLicense asks for a license for in.Domain: a 201 (new) or a 200 (the
// consumer already holds it) is success. One Idempotency-Key is sent on
// every attempt, so retries can never make a second license.
func (c *Client) CreateLicense(ctx context.Context, in CreateLicenseInput) (License, error) {
	key := in.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	} else if !validKey(key) {
		return License{}, fmt.Errorf("create license: %w", ErrInvalidKey)
	}
	body, err := json.Marshal(map[string]string{"name": in.Name, "domain": in.Domain})
	if err != nil {
		return License{}, fmt.Errorf("create license: %w", err)
	}
	resp, err := c.do(ctx, request{op: "create license", method: http.MethodPost, path: "/api/licenses",
		body: body, key: key, success: []int{http.StatusOK, http.StatusCreated}, safe: true})
	if err != nil {
		return License{}, err
	}
	lic, err := decodeData[License]("create license", resp.body)
	if err != nil {
		return License{}, err
	}
	lic.Created = resp.status == http.StatusCreated
	lic.Replayed = resp.header.Get("Idempotent-Replayed") == "true"
	return lic, nil
}

// ListLicenses returns one page of the consumer's active licenses. page and
// perPage (1–100) ≤ 0 take the API's defaults (1 and 15).
func (c *Client) ListLicenses(ctx context.Context, page, perPage int) (Page, error) {
	data, meta, err := getPage[License](ctx, c, "list licenses", pagePath("/api/licenses", url.Values{}, page, perPage))
	if err != nil {
		return Page{}, err
	}
	return Page{Licenses: data, CurrentPage: meta.CurrentPage, PerPage: meta.PerPage, Total: meta.Total, LastPage: meta.LastPage}, nil
}

func pagePath(path string, q url.Values, page, perPage int) string {
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if perPage > 0 {
		q.Set("per_page", strconv.Itoa(perPage))
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path
}

// pageMeta is the meta of a length-aware page (Laravel's paginator).
type pageMeta struct {
	CurrentPage int `json:"current_page"`
	PerPage     int `json:"per_page"`
	Total       int `json:"total"`
	LastPage    int `json:"last_page"`
}

func getPage[T any](ctx context.Context, c *Client, op, path string) ([]T, pageMeta, error) {
	resp, err := c.do(ctx, request{op: op, method: http.MethodGet, path: path, success: []int{http.StatusOK}, safe: true})
	if err != nil {
		return nil, pageMeta{}, err
	}
	var b struct {
		Data []T      `json:"data"`
		Meta pageMeta `json:"meta"`
	}
	if err := json.Unmarshal(resp.body, &b); err != nil {
		return nil, pageMeta{}, fmt.Errorf("%s: decode the response: %w", op, err)
	}
	return b.Data, b.Meta, nil
}

// GetLicense returns the consumer's license with that id; another
// consumer's or an unknown id is an *APIError with Status 404.
func (c *Client) GetLicense(ctx context.Context, id string) (License, error) {
	if id == "" {
		return License{}, errors.New("get license: the id is empty")
	}
	resp, err := c.do(ctx, request{op: "get license " + id, method: http.MethodGet,
		path: "/api/licenses/" + url.PathEscape(id), success: []int{http.StatusOK}, safe: true})
	if err != nil {
		return License{}, err
	}
	return decodeData[License]("get license "+id, resp.body)
}

// RevokeLicense revokes the consumer's license with that id. Revoking is
// safe to repeat: a license already revoked is success too.
func (c *Client) RevokeLicense(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("revoke license: the id is empty")
	}
	_, err := c.do(ctx, request{op: "revoke license " + id, method: http.MethodDelete,
		path: "/api/licenses/" + url.PathEscape(id), success: []int{http.StatusNoContent}, safe: true})
	return err
}

// RotateLicenseKey asks for a new license key for the consumer's license
// with that id (a leaked key is replaced at the vendor) and returns the
// license with its new key. Like CreateLicense it sends one Idempotency-Key
// on every attempt — idempotencyKey, or a new one when it is empty — so
// retries can never rotate twice; a pending outcome (202) is asked again
// until it settles. A revoked or revoking license is an *APIError with
// Status 409 and Code "license_not_active".
func (c *Client) RotateLicenseKey(ctx context.Context, id, idempotencyKey string) (License, error) {
	op := "rotate license key " + id
	if id == "" {
		return License{}, errors.New("rotate license key: the id is empty")
	}
	if idempotencyKey == "" {
		idempotencyKey = NewIdempotencyKey()
	} else if !validKey(idempotencyKey) {
		return License{}, fmt.Errorf("%s: %w", op, ErrInvalidKey)
	}
	resp, err := c.do(ctx, request{op: op, method: http.MethodPost, path: "/api/licenses/" + url.PathEscape(id) + "/rotate-key",
		key: idempotencyKey, success: []int{http.StatusOK}, safe: true})
	if err != nil {
		return License{}, err
	}
	lic, err := decodeData[License](op, resp.body)
	lic.Replayed = resp.header.Get("Idempotent-Replayed") == "true"
	return lic, err
}

func validKey(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}
