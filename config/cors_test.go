package config

import (
	"slices"
	"testing"
)

// CORS_ALLOWED_ORIGINS is a comma list, as Laravel's
// env('CORS_ALLOWED_ORIGINS') split into config/cors.php allowed_origins;
// empty or absent is "*", any origin. A trailing slash is dropped: an
// Origin never has one.
func TestCORSAllowedOrigins(t *testing.T) {
	t.Chdir(t.TempDir())
	for env, want := range map[string][]string{
		"":                    {"*"},
		" ":                   {"*"},
		"*":                   {"*"},
		"https://app.example": {"https://app.example"},
		" https://a.example/ , https://*.b.example,,": {"https://a.example", "https://*.b.example"},
	} {
		c, err := Load(envOf(map[string]string{"CORS_ALLOWED_ORIGINS": env}))
		if err != nil || !slices.Equal(c.CORSAllowedOrigins, want) {
			t.Errorf("CORS_ALLOWED_ORIGINS=%q: %q, %v; want %q", env, c.CORSAllowedOrigins, err, want)
		}
	}
}
