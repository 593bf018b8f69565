package config

import "net"

// DefaultURL is the tokens' issuer outside production when APP_URL is
// unset (Config.Issuer), and where `go run .` serves by default.
const DefaultURL = "http://127.0.0.1:8080"

// URLOf is the APP_URL that goes with a listen address when APP_URL is
// unset (outside production): http:// and the address, an address on every
// interface (":8080", "0.0.0.0:8080", "[::]:8080") read as the loopback
// that reaches it.
func URLOf(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// ListenAddr is APP_ADDR as Load reads it (the environment, then .env, then
// the default), without the rest of Load: `licensor healthcheck` needs only
// the address, and must neither fail for want of APP_KEY nor make a key file.
// Other variables are not validated here; only a .env that cannot be read
// is an error.
func ListenAddr(getenv func(string) string) (string, error) {
	get, err := WithDotenv(getenv)
	if err != nil {
		return "", err
	}
	return (&values{get: get}).load().Addr, nil
}

// MetricsOnAPI reports whether /metrics is served on the API's address
// (APP_ADDR): outside production when METRICS_ADDR is unset. Production
// never serves them there, where anyone who reaches the API would read
// them: only on METRICS_ADDR, and without it not over HTTP at all.
func (c Config) MetricsOnAPI() bool {
	return c.MetricsAddr == "" && c.Env != EnvProduction
}
