package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// dashboard is GET /console: the console's front page.
func (cn *Console) dashboard(c echo.Context) error {
	return cn.render(c, http.StatusOK, "dashboard", view{Title: "Dashboard", Section: "dashboard"})
}
