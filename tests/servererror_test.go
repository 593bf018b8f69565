package tests

import (
	"errors"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/database"
	"github.com/licensor-api/licensor/tests/testdb"
)

// A 500 is Laravel's production answer to the letter: {"message":"Server
// Error"}, no period, nothing of the cause, whether a handler returned an
// error nothing maps or panicked.
func TestServerErrorIsLaravelsExactMessage(t *testing.T) {
	a := newApp(t, testdb.New(t, database.SQLite))
	a.e.GET("/fail", func(echo.Context) error { return errors.New("secret internal detail") })
	a.e.GET("/panic", func(echo.Context) error { panic("secret internal detail") })
	for _, path := range []string{"/fail", "/panic"} {
		r := a.do(http.MethodGet, path, "")
		r.wantError(http.StatusInternalServerError, "")
		if got := r.Body.String(); got != `{"message":"Server Error"}` {
			t.Errorf("GET %s: body %q, want exactly {\"message\":\"Server Error\"}", path, got)
		}
	}
}
