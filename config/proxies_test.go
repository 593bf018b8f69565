package config

import (
	"fmt"
	"strings"
	"testing"
)

// TRUSTED_PROXIES is a comma list of addresses and CIDR ranges, as
// Laravel's TrustProxies; empty trusts no proxy, and "*" or anything that
// is no address stops the start with a message naming the variable.
func TestTrustedProxies(t *testing.T) {
	t.Chdir(t.TempDir())
	for env, want := range map[string]string{
		"":                          "[]",
		"10.0.0.5":                  "[10.0.0.5/32]",
		" 10.0.0.0/8 , 2001:db8::1": "[10.0.0.0/8 2001:db8::1/128]",
		"::ffff:10.0.0.5,10.1.2.3/16,::ffff:192.0.2.0/120": "[10.0.0.5/32 10.1.0.0/16 192.0.2.0/24]",
	} {
		c, err := Load(envOf(map[string]string{"TRUSTED_PROXIES": env}))
		if got := fmt.Sprint(c.TrustedProxies); err != nil || got != want {
			t.Errorf("TRUSTED_PROXIES=%q: %s, %v; want %s", env, got, err, want)
		}
	}
	for _, env := range []string{"*", "10.0.0.5,*", "proxy.internal", "10.0.0.0/33", "10.0.0.5:80"} {
		_, err := Load(envOf(map[string]string{"TRUSTED_PROXIES": env}))
		if err == nil || !strings.Contains(err.Error(), "TRUSTED_PROXIES") {
			t.Errorf("TRUSTED_PROXIES=%q: %v, want an error naming the variable", env, err)
		}
	}
}
