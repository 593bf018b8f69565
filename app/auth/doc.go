// Package auth holds consumers and their scoped tokens: JWTs signed with
// APP_KEY, checked against the personal_access_tokens table on every request.
package auth
