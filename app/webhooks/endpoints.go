package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"
	"gorm.io/gorm"

	"github.com/licensor-api/licensor/app/events"
	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/internal/fault"
)

// SecretPrefix starts every signing secret, so that one is recognisable in a
// config file or a leak scanner.
const SecretPrefix = "whsec_"

// Limits of an endpoint's fields.
const (
	maxURL         = 2048
	maxDescription = 500
	// MaxEndpoints is how many endpoints one consumer may have.
	MaxEndpoints = 16
)

// EndpointInput is a new endpoint, as a consumer asks for it.
type EndpointInput struct {
	URL         string
	Events      []string // nil: every license event
	Description string
}

// EndpointPatch is a change to an endpoint: nil fields are left as they are.
type EndpointPatch struct {
	URL     *string
	Events  *[]string
	Enabled *bool
}

// ErrTooManyEndpoints is a consumer at MaxEndpoints asking for another.
var ErrTooManyEndpoints error = fault.New("too_many_endpoints", "too many webhook endpoints")

// checkTypes validates the event types an endpoint takes: known types or
// events.LicenseWildcard, each once; none (nil) is every license event.
func checkTypes(verr *fault.Fields, types []string) []string {
	if types == nil {
		return []string{events.LicenseWildcard}
	}
	if len(types) == 0 {
		verr.Add("events", "The events field must list at least one event type.")
		return nil
	}
	out := make([]string, 0, len(types))
	for _, t := range types {
		switch {
		case t != events.LicenseWildcard && !events.IsType(t):
			verr.Add("events", fmt.Sprintf("The event type %q is not one of %s, %s.", t, events.LicenseWildcard, strings.Join(events.Types, ", ")))
		case !slices.Contains(out, t):
			out = append(out, t)
		}
	}
	return out
}

// checkURL validates an endpoint's URL under the policy.
func (s *Service) checkURL(ctx context.Context, verr *fault.Fields, raw string) string {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		verr.Add("url", "The url field is required.")
	case len(raw) > maxURL || !utf8.ValidString(raw):
		verr.Add("url", fmt.Sprintf("The url field must not be greater than %d characters.", maxURL))
	default:
		if msg := s.cfg.Policy.URLProblem(ctx, raw); msg != "" {
			verr.Add("url", msg)
		}
	}
	return raw
}

// checkDescription validates an endpoint's description.
func checkDescription(verr *fault.Fields, raw string) string {
	desc := strings.TrimSpace(raw)
	if utf8.RuneCountInString(desc) > maxDescription || !utf8.ValidString(desc) {
		verr.Add("description", fmt.Sprintf("The description field must not be greater than %d characters.", maxDescription))
	}
	return desc
}

// CheckEndpoint runs CreateEndpoint's checks of in and stores nothing: the
// *fault.Fields CreateEndpoint would answer, or nil. app/http runs it
// only when a field of the body has the wrong JSON type, so that its 422
// names every failing field, the domain's beside the types'.
func (s *Service) CheckEndpoint(ctx context.Context, in EndpointInput) error {
	verr := &fault.Fields{}
	s.checkURL(ctx, verr, in.URL)
	checkTypes(verr, in.Events)
	checkDescription(verr, in.Description)
	return verr.Err()
}

// CheckPatch runs UpdateEndpoint's checks of p and stores nothing, as
// CheckEndpoint does for a new endpoint.
func (s *Service) CheckPatch(ctx context.Context, p EndpointPatch) error {
	verr := &fault.Fields{}
	if p.URL != nil {
		s.checkURL(ctx, verr, *p.URL)
	}
	if p.Events != nil {
		given := *p.Events
		if given == nil {
			given = []string{} // as UpdateEndpoint: a change names the types
		}
		checkTypes(verr, given)
	}
	return verr.Err()
}

// newSecret is a signing secret: SecretPrefix and 32 random bytes in hex.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics first)
	return SecretPrefix + hex.EncodeToString(b)
}

// CreateEndpoint registers an endpoint for the consumer and returns it with
// its signing secret, which is shown this once: only its sealed form is kept.
func (s *Service) CreateEndpoint(ctx context.Context, consumerID string, in EndpointInput) (Endpoint, string, error) {
	verr := &fault.Fields{}
	url := s.checkURL(ctx, verr, in.URL)
	types := checkTypes(verr, in.Events)
	desc := checkDescription(verr, in.Description)
	if err := verr.Err(); err != nil {
		return Endpoint{}, "", err
	}
	secret := newSecret()
	sealed, err := s.cfg.Cipher.Encrypt([]byte(secret))
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("encrypt the endpoint's secret: %w", err)
	}
	list, _ := json.Marshal(types)
	now := s.now()
	e := Endpoint{ID: ulid.Make().String(), ConsumerID: consumerID, URL: url, Description: desc, Events: string(list),
		Secret: sealed, Enabled: true, CreatedAt: now, UpdatedAt: now}
	err = database.Transact(ctx, s.db, s.cfg.Retry, func(tx *gorm.DB) error {
		// The consumer's row, locked first (SQLite: the write lock): two
		// creates at once count one after the other, never both under the
		// limit from one snapshot.
		if err := tx.Exec("UPDATE consumers SET updated_at = updated_at WHERE id = ?", consumerID).Error; err != nil {
			return fmt.Errorf("lock the consumer: %w", err)
		}
		var n int64
		if err := tx.Model(&Endpoint{}).Where("consumer_id = ?", consumerID).Count(&n).Error; err != nil {
			return fmt.Errorf("count webhook endpoints: %w", err)
		}
		if n >= MaxEndpoints {
			return ErrTooManyEndpoints
		}
		if err := tx.Create(&e).Error; err != nil {
			return fmt.Errorf("store webhook endpoint: %w", err)
		}
		return nil
	})
	if err != nil {
		return Endpoint{}, "", err
	}
	return e, secret, nil
}

// ListEndpoints returns the consumer's endpoints, oldest first; an empty
// consumerID lists every consumer's (the operator's view).
func (s *Service) ListEndpoints(ctx context.Context, consumerID string) ([]Endpoint, error) {
	q := s.read.WithContext(ctx).Order("created_at, id")
	if consumerID != "" {
		q = q.Where("consumer_id = ?", consumerID)
	}
	var out []Endpoint
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return out, nil
}

// GetEndpoint returns the consumer's endpoint (any consumer's for an empty
// consumerID); another's is ErrNotFound.
func (s *Service) GetEndpoint(ctx context.Context, consumerID, id string) (Endpoint, error) {
	return s.endpoint(s.read.WithContext(ctx), consumerID, id)
}

func (s *Service) endpoint(db *gorm.DB, consumerID, id string) (Endpoint, error) {
	q := db.Where("id = ?", id)
	if consumerID != "" {
		q = q.Where("consumer_id = ?", consumerID)
	}
	var e Endpoint
	err := q.Take(&e).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Endpoint{}, notFound("webhook endpoint")
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("get webhook endpoint: %w", err)
	}
	return e, nil
}

// UpdateEndpoint changes the consumer's endpoint. Disabling it takes its
// pending deliveries off the schedule; enabling a disabled one clears its
// disabling and its failing streak, and its pending deliveries are due
// again at once, each with a new retry window. A new url, or enabling a
// disabled one, also closes its circuit breaker (enabling one that is
// enabled does not: a consumer cannot so cut a pause short).
func (s *Service) UpdateEndpoint(ctx context.Context, consumerID, id string, p EndpointPatch) (Endpoint, error) {
	verr := &fault.Fields{}
	set := map[string]any{}
	if p.URL != nil {
		set["url"] = s.checkURL(ctx, verr, *p.URL)
		// Another receiver: the old one's timeouts say nothing of it.
		set["consecutive_timeouts"], set["paused_until"] = 0, nil
	}
	if p.Events != nil {
		given := *p.Events
		if given == nil {
			given = []string{} // a change names the types: none is refused, not "every one"
		}
		list, _ := json.Marshal(checkTypes(verr, given))
		set["events"] = string(list)
	}
	if err := verr.Err(); err != nil {
		return Endpoint{}, err
	}
	if p.Enabled != nil {
		set["enabled"] = *p.Enabled
		if *p.Enabled {
			set["disabled_at"], set["disabled_reason"], set["failing_since"] = nil, nil, nil
			set["consecutive_timeouts"], set["paused_until"] = 0, nil
		} else {
			set["disabled_at"], set["disabled_reason"] = s.now(), "disabled by the consumer"
		}
	}
	var out Endpoint
	err := database.Transact(ctx, s.db, s.cfg.Retry, func(tx *gorm.DB) error {
		e, err := s.endpoint(tx, consumerID, id)
		if err != nil {
			return err
		}
		if p.Enabled != nil && *p.Enabled == e.Enabled {
			delete(set, "enabled") // no change: keep when and why it was disabled
			delete(set, "disabled_at")
			delete(set, "disabled_reason")
			delete(set, "failing_since")
			if p.URL == nil { // enabling what is enabled: a paused endpoint stays paused
				delete(set, "consecutive_timeouts")
				delete(set, "paused_until")
			}
		}
		if len(set) > 0 {
			now := s.now()
			set["updated_at"] = now
			if err := tx.Model(&Endpoint{}).Where("id = ?", e.ID).Updates(set).Error; err != nil {
				return fmt.Errorf("update webhook endpoint: %w", err)
			}
			if on, changed := set["enabled"].(bool); changed && on {
				err = unparkPending(tx, e.ID, now)
			} else if changed {
				err = parkPending(tx, e.ID, now)
			}
			if err != nil {
				return err
			}
		}
		out, err = s.endpoint(tx, consumerID, id)
		return err
	})
	return out, err
}

// DeleteEndpoint deletes the consumer's endpoint, with its deliveries and
// their attempts: nothing more is sent to it.
func (s *Service) DeleteEndpoint(ctx context.Context, consumerID, id string) error {
	return database.Transact(ctx, s.db, s.cfg.Retry, func(tx *gorm.DB) error {
		e, err := s.endpoint(tx, consumerID, id)
		if err != nil {
			return err
		}
		// The endpoint's row first: a dispatcher owing it an event holds it
		// (a locking read) until its deliveries are written, and the
		// deletes below then see them.
		if err := tx.Where("id = ?", e.ID).Delete(&Endpoint{}).Error; err != nil {
			return fmt.Errorf("delete webhook endpoint: %w", err)
		}
		owed := tx.Model(&Delivery{}).Select("id").Where("endpoint_id = ?", e.ID)
		if err := tx.Where("delivery_id IN (?)", owed).Delete(&Attempt{}).Error; err != nil {
			return fmt.Errorf("delete the endpoint's attempts: %w", err)
		}
		if err := tx.Where("endpoint_id = ?", e.ID).Delete(&Delivery{}).Error; err != nil {
			return fmt.Errorf("delete the endpoint's deliveries: %w", err)
		}
		return nil
	})
}

// secret opens the endpoint's signing secret.
func (s *Service) secret(e Endpoint) (string, error) {
	b, err := s.cfg.Cipher.Decrypt(e.Secret)
	if err != nil {
		return "", fmt.Errorf("decrypt the secret of webhook endpoint %s: %w", e.ID, err)
	}
	return string(b), nil
}
