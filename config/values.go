package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// values reads raw variables and collects one error per bad variable, so that
// a person fixing a configuration sees every mistake at once.
type values struct {
	get  func(string) string
	errs []error
}

func (v *values) fail(name, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("config: %s: %s", name, fmt.Sprintf(format, args...)))
}

func (v *values) str(name, def string) string {
	if s := strings.TrimSpace(v.get(name)); s != "" {
		return s
	}
	return def
}

// storage reads a directory that is made on first use: a path that exists
// must be a directory.
func (v *values) storage(name, def string) string {
	dir := v.str(name, def)
	if info, err := os.Stat(dir); err == nil && !info.IsDir() {
		v.fail(name, "%s is not a directory", dir)
	}
	return dir
}

func (v *values) require(name, s string) {
	if s == "" {
		v.fail(name, "is required by the chosen driver")
	}
}

func (v *values) requireURL(name, s string) {
	if s == "" {
		v.require(name, s)
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.fail(name, "%q is not an http(s) URL", s)
	}
}

// redisURL checks a Redis URL as go-redis reads one: redis:// or rediss://
// with a host and an optional database number as its path, or unix:// with
// a socket path. The error never shows the password.
func (v *values) redisURL(name, s string) {
	u, err := url.Parse(s)
	if err != nil {
		v.fail(name, "is not a URL such as redis://127.0.0.1:6379/0")
		return
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Hostname() == "" {
			v.fail(name, "%q has no host: give one, e.g. redis://127.0.0.1:6379/0", u.Redacted())
			return
		}
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			if n, err := strconv.Atoi(db); err != nil || n < 0 {
				v.fail(name, "%q: the path is the database number, a whole number from 0 (e.g. /0)", u.Redacted())
			}
		}
	case "unix":
		if u.Path == "" {
			v.fail(name, "%q has no socket path, e.g. unix:///run/redis/redis.sock", u.Redacted())
		}
	default:
		v.fail(name, "%q is not a redis://, rediss:// or unix:// URL", u.Redacted())
	}
}

func (v *values) oneOf(name, def string, allowed ...string) string {
	s := v.str(name, def)
	if !slices.Contains(allowed, s) {
		v.fail(name, "%q is not one of %s", s, strings.Join(allowed, ", "))
	}
	return s
}

func (v *values) duration(name, def string) time.Duration {
	s := v.str(name, def)
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		v.fail(name, "%q is not a positive duration such as 500ms, 10s or 24h", s)
		return 0
	}
	return d
}

func (v *values) durationOrOff(name, def string) time.Duration {
	if v.str(name, def) == "0" {
		return 0
	}
	return v.duration(name, def)
}

func (v *values) optionalDuration(name string) time.Duration {
	if v.str(name, "") == "" {
		return 0
	}
	return v.duration(name, "")
}

func (v *values) intRange(name string, def, lo, hi int) int {
	s := v.str(name, strconv.Itoa(def))
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		v.fail(name, "%q is not a whole number from %d to %d", s, lo, hi)
		return def
	}
	return n
}

func (v *values) share(name string, def float64) float64 {
	s := v.str(name, strconv.FormatFloat(def, 'g', -1, 64))
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1) {
		v.fail(name, "%q is not a fraction above 0 and at most 1, such as 0.5 or 1", s)
		return def
	}
	return f
}

func (v *values) boolean(name string, def bool) bool {
	s := v.str(name, strconv.FormatBool(def))
	b, err := strconv.ParseBool(s)
	if err != nil {
		v.fail(name, "%q is not true or false", s)
	}
	return b
}

// size parses a byte size such as 65536, 64KB, 64KiB or 1MB (KB and MB are
// taken as 1024-based, the way Laravel and PHP read them).
func (v *values) size(name, def string) int64 {
	s := v.str(name, def)
	upper := strings.ToUpper(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if strings.HasSuffix(upper, u.suffix) {
			upper, mult = strings.TrimSpace(strings.TrimSuffix(upper, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(upper, 10, 64)
	if err != nil || n <= 0 || n > (1<<30)/mult {
		v.fail(name, "%q is not a size such as 65536, 64KB or 1MB (at most 1GB)", s)
		return 0
	}
	return n * mult
}

// prefixes reads a comma list of CIDR prefixes (10.1.2.0/24, fd00::/8) or
// bare addresses (a /32 or /128), each at least minBits long. A prefix with
// bits set past its length, or an IPv4 range written in IPv6 (::ffff:…),
// is refused rather than guessed at: the address rule compares plain IPv4.
func (v *values) prefixes(name string, minBits int) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range strings.Split(v.str(name, ""), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if a, aerr := netip.ParseAddr(s); aerr == nil && a.Zone() == "" {
			p, err = netip.PrefixFrom(a, a.BitLen()), nil
		}
		switch {
		case err != nil:
			v.fail(name, "%q is not a CIDR prefix such as 10.1.2.0/24 or fd00::/8, nor an address", s)
		case p.Addr().Is4In6():
			v.fail(name, "%q is an IPv4 range written as IPv6: write it as IPv4 (e.g. 10.1.2.0/24)", s)
		case p != p.Masked():
			v.fail(name, "%q has bits set past its length: write %s", s, p.Masked())
		case p.Bits() < minBits:
			v.fail(name, "%q is wider than /%d: name the networks webhooks must reach, not every address", s, minBits)
		default:
			out = append(out, p)
		}
	}
	return out
}
