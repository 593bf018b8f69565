package http

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/app/resource"
)

// issueToken is POST /api/tokens. The caller's token must be allowed to
// grant every ability asked for (auth.Grantable: a tokens:manage token grants
// the consumer abilities only, a * token anything); else 403
// ability_not_grantable, before any other check of the input (as a Laravel
// FormRequest's authorize() runs before its rules). Then the body's rules,
// request.IssueTokenRules, every failing field in their order; then the
// consumer's name and the lifetime's maximum (auth). The new token keeps
// the caller's as its issuer, and the issue is in the audit trail.
func (s *Server) issueToken(c echo.Context) error {
	if err := checkJSONType(c); err != nil {
		return err
	}
	b, err := readBody(c)
	if err != nil {
		return err
	}
	raw, err := request.Object(b)
	if err != nil {
		return err
	}
	req, verr := request.BindIssueToken(raw, auth.Known)
	if err := auth.Grantable(principal(c).Abilities, req.Abilities); err != nil {
		return err
	}
	if verr != nil {
		return verr
	}
	in := auth.IssueInput{Consumer: req.Consumer, Abilities: req.Abilities, Name: req.Name, TTL: req.TTL}
	issued, err := s.auth.Issue(c.Request().Context(), actor(c), in)
	if err != nil {
		// auth's own checks (the consumer's name, the longest lifetime)
		// report their fields in the rules' order too.
		return request.MergeFields(nil, err, request.IssueTokenRules)
	}
	res := resource.NewToken(issued.Token)
	res.Token = issued.Secret
	return c.JSON(http.StatusCreated, resource.Data{Data: res})
}

// listTokens is GET /api/tokens[?consumer=NAME].
func (s *Server) listTokens(c echo.Context) error {
	toks, err := s.auth.List(c.Request().Context(), c.QueryParam("consumer"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, resource.Data{Data: resource.NewTokens(toks)})
}

// revokeToken is DELETE /api/tokens/{id}: 204, also for a token revoked
// already (which records nothing more); 403 ability_not_grantable when the
// caller's token may not revoke it (auth.Revocable: only a * token revokes
// a token holding an admin ability, but any token may revoke itself).
func (s *Server) revokeToken(c echo.Context) error {
	if err := s.auth.Revoke(c.Request().Context(), actor(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
