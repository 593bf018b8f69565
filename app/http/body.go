package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/request"
	"github.com/licensor-api/licensor/internal/fault"
)

var (
	errMalformedJSON = &Error{Status: http.StatusBadRequest, Message: "The request body is not valid JSON.", Code: "malformed_json"}
	errNotJSON       = &Error{Status: http.StatusUnsupportedMediaType, Message: "The request body must be JSON or a form (Content-Type: application/json, application/x-www-form-urlencoded or multipart/form-data).", Code: "unsupported_media_type"}
)

// webhookPath is the route whose body is verified as sent (its signature
// covers the bytes): formBodies leaves it alone.
const webhookPath = "/api/webhooks/vendor"

// notAForm replaces a form (or query string) that cannot be read: it is
// not JSON, so whatever reads the body refuses it as malformed.
var notAForm = []byte("not a form")

// formBodies reads a form body (application/x-www-form-urlencoded,
// multipart/form-data) as the JSON object it stands for, and merges the
// query string of a POST, PUT or PATCH into it, before anything else reads
// the body: the handlers, the idempotency guard (its fingerprint, the
// record's stored request, the reconciler's resume) and the body checks
// then see one request however its input was sent, as Laravel's
// $request->input() merges them (body + query: a key the body has wins).
// The body limit applies to the body as sent. A form or query that cannot
// be parsed becomes a body that is not JSON, so it is refused
// (400 malformed_json) where a bad JSON body would be, after
// authentication. A body that is neither a form nor a JSON object (a
// malformed one, an array, another type) passes as it is, query or not.
func (s *Server) formBodies(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		ct := req.Header.Get(echo.HeaderContentType)
		hasBody := req.Body != nil && req.Body != http.NoBody
		form := hasBody && request.IsForm(ct)
		query := req.URL.RawQuery != "" && takesInput(req.Method)
		if !form && !query || c.Path() == webhookPath ||
			(s.pages != nil && s.pages.Owns(req.URL.Path)) { // a page's form is a form
			return next(c)
		}
		var b []byte
		if hasBody {
			var err error
			if b, err = readBody(c); err != nil {
				return err
			}
		}
		asJSON := form || len(bytes.TrimSpace(b)) == 0
		if form {
			converted, err := request.FormJSON(ct, b)
			if err != nil {
				converted = notAForm
			}
			b = converted
		}
		if query && (asJSON || request.CheckJSON(ct) == nil) {
			merged, err := request.MergeQuery(b, req.URL.RawQuery)
			if err != nil {
				merged = notAForm
			}
			b = merged
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.ContentLength = int64(len(b))
		if asJSON {
			req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		}
		return next(c)
	}
}

// takesInput reports whether a request of the method has its query string
// merged into its body: the methods whose body is the input.
func takesInput(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}

// readBody reads the whole request body (the body limit applies).
func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	if errors.Is(err, errTooLarge) {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, errMalformedJSON
	}
	return b, nil
}

// bindJSON decodes a JSON object body into v. Unknown fields are ignored;
// a value of the wrong type is a validation error on its field.
func bindJSON(c echo.Context, v any) error {
	if err := checkJSONType(c); err != nil {
		return err
	}
	b, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeJSON(b, v)
}

// checkJSONType refuses a body whose Content-Type says it is not JSON.
func checkJSONType(c echo.Context) error {
	return request.CheckJSON(c.Request().Header.Get(echo.HeaderContentType))
}

// decodeJSON decodes a body already read, as bindJSON does.
func decodeJSON(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return errMalformedJSON
	}
	if field := request.InvalidUTF8Field(b); field != "" { // refused, not read with the bad bytes replaced
		return &fault.Fields{Fields: map[string][]string{field: {request.InvalidUTF8(field)}}}
	}
	err := json.Unmarshal(b, v)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		return &fault.Fields{Fields: map[string][]string{field: {fmt.Sprintf("The %s field must be %s.", field, jsonKind(typeErr.Type.Kind().String()))}}}
	}
	if err != nil {
		return errMalformedJSON
	}
	return nil
}

// jsonKind is Laravel's wording for the type a field must have.
func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice", "array", "struct", "map":
		return "an array"
	case "bool":
		return "true or false"
	}
	return "a number"
}
