package console

import (
	"context"
	"fmt"
	"runtime/debug"
)

// unknown stands for what the build did not record: a binary built with
// -buildvcs=false (or outside a checkout) has no commit, for instance.
const unknown = "unknown"

// buildVersion is what the binary knows of its own build.
type buildVersion struct {
	// Version is the main module's version: a tag or a pseudo-version when
	// the go command stamped one, "devel" for a plain build of a checkout
	// (Go's "(devel)", without the parentheses a User-Agent may not hold),
	// or "unknown".
	Version  string
	Commit   string // the VCS revision, or "unknown"
	Modified bool   // the checkout had uncommitted changes
	Go       string // the toolchain that built the binary, or "unknown"
}

// stampedVersion and stampedCommit are set at link time by a build that has
// no VCS information to record, such as the container image's (the
// Dockerfile's VERSION and COMMIT build arguments):
//
//	go build -ldflags "-X github.com/licensor-api/licensor/app/console.stampedVersion=v1.4.0
//	  -X github.com/licensor-api/licensor/app/console.stampedCommit=$(git rev-parse HEAD)" .
//
// Link-time constants, never assigned at run time. Empty: not stamped.
var (
	stampedVersion string
	stampedCommit  string
)

// readBuildVersion is the running binary's build, with what the link stamped.
func readBuildVersion() buildVersion {
	return buildVersionOf(debug.ReadBuildInfo()).stamped(stampedVersion, stampedCommit)
}

func (v buildVersion) stamped(version, commit string) buildVersion {
	if version != "" {
		v.Version = version
	}
	if commit != "" {
		v.Commit, v.Modified = commit, false
	}
	return v
}

func buildVersionOf(bi *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Version: unknown, Commit: unknown, Go: unknown}
	if !ok || bi == nil {
		return v
	}
	switch bi.Main.Version {
	case "":
	case "(devel)":
		v.Version = "devel"
	default:
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				v.Commit = s.Value
			}
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

var _ fmt.Stringer = buildVersion{}

// patchedGo is the first Go without the standard-library vulnerabilities
// known to reach licensor (MIME header parsing): go.mod's toolchain line
// builds with a later one wherever the go command may switch toolchains.
var patchedGo = [3]int{1, 26, 10}

// KnownVulnerable reports whether the binary was built by a Go older than
// patchedGo (a machine whose GOTOOLCHAIN is "local" ignores go.mod's
// toolchain line): serve says so at start, rather than run silently on it.
func (v buildVersion) KnownVulnerable() bool {
	var got [3]int
	if n, _ := fmt.Sscanf(v.Go, "go%d.%d.%d", &got[0], &got[1], &got[2]); n < 2 {
		return false // a development build, or unknown: nothing to compare
	}
	for i := range got {
		if got[i] != patchedGo[i] {
			return got[i] < patchedGo[i]
		}
	}
	return false
}

// UserAgent is the User-Agent the vendor driver sends: licensor/<Version>.
func (v buildVersion) UserAgent() string { return "licensor/" + v.Version }

// String is what `licensor version` prints.
func (v buildVersion) String() string {
	commit := v.Commit
	if v.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("version  %s\ncommit   %s\ngo       %s\n", v.Version, commit, v.Go)
}

func versionCmd(_ context.Context, e env) error {
	const summary = "Prints licensor's version, the commit it was built from (\"modified\" when the checkout had changes) and the Go that built it."
	if ok, err := noArgs(e, "version", summary); !ok {
		return err
	}
	_, err := fmt.Fprint(e.stdout, readBuildVersion())
	return err
}
