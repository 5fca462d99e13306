package httpapi

import (
	"cmp"
	"runtime"
	"runtime/debug"
)

// BuildInfo is what the binary knows of its own build: what
// opledger_build_info reports and `opledger version` prints.
type BuildInfo struct {
	// Version is the main module's version: a tag for `go install
	// module@version`, "(devel)" for a build from a checkout.
	Version string
	// Revision is the VCS commit the binary was built from, Time its
	// commit time, and Modified whether the work tree had changes; empty
	// when the build did not record them (go run, -buildvcs=false).
	Revision, Time string
	Modified       bool
	// GoVersion is the toolchain that built it; Platform its GOOS/GOARCH.
	GoVersion, Platform string
}

// Build reads the binary's build information.
func Build() BuildInfo {
	b := BuildInfo{Version: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version = cmp.Or(bi.Main.Version, b.Version)
	b.GoVersion = cmp.Or(bi.GoVersion, b.GoVersion)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// RevisionLabel is the revision as one word: "unknown" when not recorded,
// with "-dirty" when the work tree had changes.
func (b BuildInfo) RevisionLabel() string {
	if b.Revision == "" {
		return "unknown"
	}
	if b.Modified {
		return b.Revision + "-dirty"
	}
	return b.Revision
}
