package auth

import "github.com/licensor-api/licensor/internal/fault"

// Errors the service returns; app/http's table answers each by its code.
var (
	// ErrUnauthenticated is every reason a token is refused, never told
	// apart to the caller.
	ErrUnauthenticated error = fault.New("unauthenticated", "unauthenticated")
	// ErrTokenNotFound means no token has that id.
	ErrTokenNotFound error = fault.New("token_not_found", "token not found")
)
