package web

import (
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/licensor-api/licensor/app/auth"
)

// Mount adds the console's routes to e: the sign-in page and the assets for
// anyone, every other page behind a session and the ability its API route
// asks. signedIn is the HTTP layer's hook that names a session's token on
// its access line.
func (cn *Console) Mount(e *echo.Echo, signedIn func(c echo.Context, p auth.Principal)) {
	cn.signedIn = signedIn
	g := e.Group(Prefix, securityHeaders)
	g.GET("/assets/*", cn.asset)
	g.GET("/login", cn.showLogin)
	g.POST("/login", cn.login)

	g.POST("/logout", cn.page("", cn.logout))
	g.GET("", cn.page("", cn.dashboard))

	g.GET("/intents", cn.page(auth.IntentsManage, cn.intents))
	g.GET("/intents/:id", cn.page(auth.IntentsManage, cn.intent))
	g.POST("/intents/:id/retry", cn.page(auth.IntentsManage, cn.retryIntent))
	g.POST("/intents/:id/discard", cn.page(auth.IntentsManage, cn.discardIntent))

	// No API route reads any consumer's licenses: intents:manage is the
	// operator's read of every consumer's records (GET /api/intents, GET
	// /api/webhook-deliveries), so it opens these too.
	g.GET("/licenses", cn.page(auth.IntentsManage, cn.searchLicenses))
	g.GET("/licenses/:id", cn.page(auth.IntentsManage, cn.showLicense))
	g.POST("/licenses/:id/rotate-key", cn.page(auth.IntentsManage, cn.rotateKey))

	g.GET("/tokens", cn.page(auth.TokensManage, cn.tokens))
	g.POST("/tokens", cn.page(auth.TokensManage, cn.issueToken))
	g.GET("/tokens/events", cn.page(auth.TokensManage, cn.tokenEvents))
	g.GET("/tokens/:id/events", cn.page(auth.TokensManage, cn.tokenEvents))
	g.POST("/tokens/:id/revoke", cn.page(auth.TokensManage, cn.revokeToken))

	g.GET("/webhooks", cn.page(auth.IntentsManage, cn.webhooks))
	g.GET("/webhooks/endpoints/:id", cn.page(auth.IntentsManage, cn.webhookEndpoint))
	g.POST("/webhooks/deliveries/:id/retry", cn.page(auth.IntentsManage, cn.retryDelivery))
}

// asset serves an embedded asset, cached for an hour (they change only with
// the binary); a name there is none of is the console's 404 page.
func (cn *Console) asset(c echo.Context) error {
	name := "assets/" + c.Param("*")
	if !fs.ValidPath(name) {
		return echo.ErrNotFound
	}
	if st, err := fs.Stat(assetFiles, name); err != nil || st.IsDir() {
		return echo.ErrNotFound
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=3600")
	http.ServeFileFS(c.Response(), c.Request(), assetFiles, name)
	return nil
}
