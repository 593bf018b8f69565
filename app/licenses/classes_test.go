package licenses

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/internal/fault"
	"github.com/licensor-api/licensor/tests/testdb"
)

// classOf is the class an intent's attempt history records for the error
// (app/idempotency reads it so), "" for none.
func classOf(err error) string {
	var fields *fault.Fields
	if code := fault.Code(err); code != "" || !errors.As(err, &fields) {
		return code
	}
	return fault.ClassInvalidInput
}

// Every error of the domain names its class for an intent's attempt
// history, through any wrapping, never with its text; the sentinels are
// still matched by errors.Is.
func TestErrorsNameTheirClass(t *testing.T) {
	for want, err := range map[string]error{
		"vendor_unavailable": fmt.Errorf("find vendor site: %w", &UnavailableError{Err: errors.New("LK-1 body")}),
		"vendor_rejected":    &RejectedError{Status: 422, Message: "LK-1 body"},
		"vendor_uncertain":   &UncertainError{Err: errors.New("LK-1 body"), Domain: "a.test"},
		"invalid_input":      fmt.Errorf("stored request: %w", &ValidationError{Fields: map[string][]string{"domain": {"x"}}}),
		"domain_taken":       fmt.Errorf("x: %w", ErrDomainTaken),
		"license_not_found":  ErrNotFound,
	} {
		if got := classOf(err); got != want {
			t.Errorf("class of %v = %q, want %q", err, got, want)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", ErrDomainTaken), ErrDomainTaken) || errors.Is(ErrNotFound, ErrDomainTaken) ||
		ErrDomainTaken.Error() != "the domain is licensed to another consumer" || ErrNotFound.Error() != "license not found" {
		t.Error("the sentinels lost their identity or their words")
	}
	if classOf(errors.New("plain")) != "" {
		t.Error("a plain error named a class")
	}
}

// A key no configured key opens is key_unavailable, and still
// crypt.ErrDecrypt (503 key_unavailable to a request), with the words it had.
func TestUndecryptableKeyIsKeyUnavailable(t *testing.T) {
	db := testdb.New(t, "sqlite")
	seedConsumer(t, db, "c1")
	ctx := context.Background()
	lic, _, err := New(Config{DB: db.Gorm, Vendor: &deadlineVendor{}, Cipher: testCipher(t, 1)}).create(ctx, "c1", Input{Name: "A", Domain: "a.test"}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{DB: db.Gorm, Vendor: &deadlineVendor{}, Cipher: testCipher(t, 2)}).Get(ctx, "c1", lic.ID)
	if !errors.Is(err, crypt.ErrDecrypt) || classOf(err) != "key_unavailable" || err.Error() != "decrypt the key of license "+lic.ID+": "+crypt.ErrDecrypt.Error() {
		t.Errorf("Get under another key = %v (class %q), want ErrDecrypt, key_unavailable", err, classOf(err))
	}
}
