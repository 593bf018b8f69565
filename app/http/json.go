package http

import (
	"bytes"
	"encoding/json"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/resource"
)

// jsonSerializer renders every response through resource.Marshal (compact, no
// trailing newline, as Laravel answers), so that a body rendered outside a
// request, by the reconciler, is byte for byte what a handler sends.
type jsonSerializer struct{}

var _ echo.JSONSerializer = jsonSerializer{}

// Serialize writes i as JSON; indent is honoured for ?pretty.
func (jsonSerializer) Serialize(c echo.Context, i any, indent string) error {
	b, err := resource.Marshal(i)
	if err != nil {
		return err
	}
	if indent != "" {
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", indent); err != nil {
			return err
		}
		b = out.Bytes()
	}
	_, err = c.Response().Write(b)
	return err
}

// Deserialize is unused: handlers decode bodies with bindJSON.
func (jsonSerializer) Deserialize(c echo.Context, i any) error {
	return json.NewDecoder(c.Request().Body).Decode(i)
}
