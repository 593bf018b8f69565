package http

import (
	"encoding/json"

	"github.com/labstack/echo/v4"
)

// jsonSerializer renders every response as json.Marshal does (compact, no
// trailing newline, as Laravel answers), so that a body rendered outside a
// request, by the reconciler, is byte for byte what a handler sends.
type jsonSerializer struct{}

// Serialize writes i as JSON; indent is honoured for ?pretty.
func (jsonSerializer) Serialize(c echo.Context, i any, indent string) error {
	var b []byte
	var err error
	if indent != "" {
		b, err = json.MarshalIndent(i, "", indent)
	} else {
		b, err = json.Marshal(i)
	}
	if err != nil {
		return err
	}
	_, err = c.Response().Write(b)
	return err
}

// Deserialize is unused: handlers decode bodies with bindJSON.
func (jsonSerializer) Deserialize(c echo.Context, i any) error {
	return json.NewDecoder(c.Request().Body).Decode(i)
}
