package auth

import "github.com/licensor-api/licensor/internal/fault"

// Errors the service returns; app/http's table answers each by its code.
var (
	// ErrUnauthenticated covers every reason a token is refused: malformed,
	// forged, expired, revoked or unknown. The reason is never told apart to
	// the caller.
	ErrUnauthenticated error = fault.New("unauthenticated", "unauthenticated")
	// ErrTokenNotFound means no token has that id.
	ErrTokenNotFound error = fault.New("token_not_found", "token not found")
)

// ValidationError is the input's field errors: a *fault.Fields. The name
// stays while the command line (app/console) names it.
type ValidationError = fault.Fields
