package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"
)

var (
	errMalformedJSON = &Error{Status: http.StatusBadRequest, Message: "The request body is not valid JSON.", Code: "malformed_json"}
	errNotJSON       = &Error{Status: http.StatusUnsupportedMediaType, Message: "The request body must be JSON (Content-Type: application/json).", Code: "unsupported_media_type"}
)

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
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !hasJSONSuffix(mt)) {
			return errNotJSON
		}
	}
	return nil
}

// decodeJSON decodes a body already read, as bindJSON does.
func decodeJSON(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return errMalformedJSON
	}
	err := json.Unmarshal(b, v)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		return &Error{
			Status:  http.StatusUnprocessableEntity,
			Message: fmt.Sprintf("The %s field has the wrong type.", field),
			Fields:  map[string][]string{field: {fmt.Sprintf("The %s field must be a %s.", field, jsonKind(typeErr.Type.Kind().String()))}},
		}
	}
	if err != nil {
		return errMalformedJSON
	}
	return nil
}

func hasJSONSuffix(mt string) bool {
	return len(mt) > 5 && mt[len(mt)-5:] == "+json"
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "slice", "array":
		return "list"
	case "struct", "map":
		return "object"
	case "bool":
		return "boolean"
	}
	return "number"
}
