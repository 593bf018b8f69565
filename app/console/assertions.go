package console

import (
	"github.com/licensor-api/licensor/app/crypt"
	"github.com/licensor-api/licensor/app/idempotency"
	"github.com/licensor-api/licensor/app/licenses"
)

// The interfaces whose implementation lives in a package that may not
// import the one declaring them: checked here, where both are known.
var (
	// app/crypt imports the standard library only.
	_ licenses.Cipher    = (*crypt.Cipher)(nil)
	_ idempotency.Cipher = (*crypt.Cipher)(nil)
)
