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
	assets, _ := fs.Sub(assetFiles, "assets")
	g.GET("/assets/*", echo.WrapHandler(http.StripPrefix(Prefix+"/assets/", assetHandler(assets))))
	g.GET("/login", cn.showLogin)
	g.POST("/login", cn.login)

	s := g.Group("", cn.requireSession)
	s.POST("/logout", cn.logout)
	s.GET("", cn.dashboard)

	s.GET("/intents", cn.intents, can(auth.IntentsManage))
	s.GET("/intents/:id", cn.intent, can(auth.IntentsManage))
	s.POST("/intents/:id/retry", cn.retryIntent, can(auth.IntentsManage))
	s.POST("/intents/:id/discard", cn.discardIntent, can(auth.IntentsManage))

	// No API route reads any consumer's licenses: intents:manage is the
	// operator's read of every consumer's records (GET /api/intents, GET
	// /api/webhook-deliveries), so it opens these too.
	s.GET("/licenses", cn.searchLicenses, can(auth.IntentsManage))
	s.GET("/licenses/:id", cn.showLicense, can(auth.IntentsManage))

	s.GET("/tokens", cn.tokens, can(auth.TokensManage))
	s.POST("/tokens", cn.issueToken, can(auth.TokensManage))
	s.GET("/tokens/events", cn.tokenEvents, can(auth.TokensManage))
	s.GET("/tokens/:id/events", cn.tokenTrail, can(auth.TokensManage))
	s.POST("/tokens/:id/revoke", cn.revokeToken, can(auth.TokensManage))

	s.GET("/webhooks", cn.webhooks, can(auth.IntentsManage))
	s.GET("/webhooks/endpoints/:id", cn.webhookEndpoint, can(auth.IntentsManage))
	s.POST("/webhooks/deliveries/:id/retry", cn.retryDelivery, can(auth.IntentsManage))
}

// assetHandler serves the embedded assets, cached for an hour (they change
// only with the binary).
func assetHandler(assets fs.FS) http.Handler {
	files := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
