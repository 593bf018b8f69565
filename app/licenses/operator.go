package licenses

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"
)

// Statuses are every status a license may be in, in the order the API
// documents them.
var Statuses = []string{StatusActive, StatusSuspended, StatusRevoking, StatusRevoked}

// SearchQuery selects licenses for an operator, across consumers.
type SearchQuery struct {
	// Domain is a part of the domain, "" for any: normalised as stored
	// (whole non-ASCII labels then match), and matched anywhere, % and _ as
	// themselves.
	Domain        string
	ConsumerID    string // "" for every consumer's
	Status        string // one of Statuses, "" for all, revoked included
	Page, PerPage int    // Page from 1 (0 is 1); PerPage 0: DefaultPerPage
}

// DefaultPerPage is how many licenses a page of Search holds unless told.
const DefaultPerPage = 15

// likeEscape is the escape character of Search's LIKE: one neither MySQL's
// string literals nor SQLite's treat as special, so that one ESCAPE clause
// serves both.
const likeEscape = "!"

var likeEscaper = strings.NewReplacer(likeEscape, likeEscape+likeEscape, "%", likeEscape+"%", "_", likeEscape+"_")

// searchDomain is a domain search's text in the form domains are stored;
// ok is false for one no stored domain can hold (non-ASCII with no ASCII
// form), which matches nothing.
func searchDomain(raw string) (domain string, ok bool) {
	s := strings.ToLower(strings.TrimSpace(raw))
	if isASCII(s) {
		return s, true
	}
	ascii, err := domainProfile.ToASCII(s)
	return ascii, err == nil && isASCII(ascii)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Search lists the licenses q selects, any consumer's, newest first, a
// page at a time, with how many it selects in all: the operator's view. A
// domain part is a scan of what the other filters leave (an operator's
// search, not a request's path). The licenses come without their keys: an
// operator's list shows none, so none is read or opened.
func (s *Service) Search(ctx context.Context, q SearchQuery) (Page, error) {
	if q.Status != "" && !slices.Contains(Statuses, q.Status) {
		return Page{}, &ValidationError{Fields: map[string][]string{"status": {"The selected status is invalid."}}}
	}
	page, perPage := max(q.Page, 1), q.PerPage
	if perPage <= 0 {
		perPage = DefaultPerPage
	}
	sel := s.cfg.Read.WithContext(ctx).Model(&License{})
	if q.ConsumerID != "" {
		sel = sel.Where("consumer_id = ?", q.ConsumerID)
	}
	if q.Status != "" {
		sel = sel.Where("status = ?", q.Status)
	}
	switch d, ok := searchDomain(q.Domain); {
	case !ok:
		return Page{Licenses: []License{}}, nil
	case d != "":
		sel = sel.Where("domain LIKE ? ESCAPE '"+likeEscape+"'", "%"+likeEscaper.Replace(d)+"%")
	}
	var p Page
	if err := sel.Count(&p.Total).Error; err != nil {
		return Page{}, fmt.Errorf("count licenses: %w", err)
	}
	err := sel.Omit("license_key").Order("created_at DESC, id DESC").Offset((page - 1) * perPage).Limit(perPage).Find(&p.Licenses).Error
	if err != nil {
		return Page{}, fmt.Errorf("search licenses: %w", err)
	}
	return p, nil
}

// Find returns any consumer's license by its id, or ErrNotFound: the
// operator's view. A key no configured key opens leaves KeyUnavailable set.
func (s *Service) Find(ctx context.Context, id string) (License, error) {
	var lic License
	err := s.cfg.Read.WithContext(ctx).Where("id = ?", id).Take(&lic).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return License{}, ErrNotFound
	}
	if err != nil {
		return License{}, fmt.Errorf("find license: %w", err)
	}
	s.openForOperator(ctx, &lic)
	return lic, nil
}

// openForOperator opens the key in place; one no configured key opens is
// shown without it, and the license's id is logged at Warn.
func (s *Service) openForOperator(ctx context.Context, lic *License) {
	if err := s.open(lic); err != nil {
		s.cfg.Log.WarnContext(ctx, "license shown without its key: no configured key opens it", "license_id", lic.ID)
		lic.LicenseKey, lic.KeyUnavailable = "", true
	}
}
