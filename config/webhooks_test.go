package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// prodEnv is a production environment Load accepts, with extra on top.
func prodEnv(extra map[string]string) map[string]string {
	env := map[string]string{"APP_ENV": EnvProduction, "APP_KEY": testKey,
		"APP_URL": "https://licensor.test", "VENDOR_ALLOW_FAKE": "true"}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// Outside production WEBHOOK_ALLOW_PRIVATE=true is taken (production
// refuses it: TestRefusalsNameTheVariables), and false is taken anywhere.
func TestProductionRefusesPrivateWebhooks(t *testing.T) {
	t.Chdir(t.TempDir())
	if c, err := Load(envOf(prodEnv(map[string]string{"WEBHOOK_ALLOW_PRIVATE": "false"}))); err != nil || c.Webhooks.AllowPrivate {
		t.Errorf("production with WEBHOOK_ALLOW_PRIVATE=false: %v, allow %v; want it served, private refused", err, c.Webhooks.AllowPrivate)
	}
	for _, env := range []string{EnvLocal, EnvTesting} {
		c, err := Load(envOf(map[string]string{"APP_ENV": env, "WEBHOOK_ALLOW_PRIVATE": "true"}))
		if err != nil || !c.Webhooks.AllowPrivate {
			t.Errorf("%s with WEBHOOK_ALLOW_PRIVATE=true: %v, allow %v; want it taken", env, err, c.Webhooks.AllowPrivate)
		}
	}
}

// WEBHOOK_PRIVATE_ALLOWLIST takes CIDR prefixes and bare addresses, in
// production too; a bad entry is an error naming the variable and the entry.
func TestPrivateAllowlist(t *testing.T) {
	t.Chdir(t.TempDir())
	c, err := Load(envOf(prodEnv(map[string]string{"WEBHOOK_PRIVATE_ALLOWLIST": " 10.1.2.0/24, fd00::/8,192.168.7.9 ,fe80::1,,"})))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24"), netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("192.168.7.9/32"), netip.MustParsePrefix("fe80::1/128")}
	if !slices.Equal(c.Webhooks.PrivateAllowlist, want) {
		t.Errorf("allowlist = %v, want %v", c.Webhooks.PrivateAllowlist, want)
	}
	if c, err := Load(envOf(nil)); err != nil || c.Webhooks.PrivateAllowlist != nil {
		t.Errorf("default allowlist = %v (%v), want none", c.Webhooks.PrivateAllowlist, err)
	}
	for bad, says := range map[string]string{
		"10.1.2.0/33":         "not a CIDR prefix",
		"ten.example":         "not a CIDR prefix",
		"10.1.2.3/24":         "write 10.1.2.0/24",
		"0.0.0.0/0":           "wider than /8",
		"::/0":                "wider than /8",
		"10.0.0.0/7":          "wider than /8",
		"::ffff:10.0.0.0/104": "write it as IPv4",
		"fe80::1%eth0":        "not a CIDR prefix",
	} {
		_, err := Load(envOf(map[string]string{"WEBHOOK_PRIVATE_ALLOWLIST": "10.9.0.0/16," + bad}))
		if err == nil || !strings.Contains(err.Error(), "WEBHOOK_PRIVATE_ALLOWLIST") || !strings.Contains(err.Error(), says) ||
			!strings.Contains(err.Error(), bad) {
			t.Errorf("WEBHOOK_PRIVATE_ALLOWLIST=%s: err = %v, want it named, with %q", bad, err, says)
		}
	}
}
