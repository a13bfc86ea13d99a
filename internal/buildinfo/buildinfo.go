// Package buildinfo tells which build of pactledger is running: the
// module version and VCS revision the Go toolchain recorded in the binary
// (runtime/debug.ReadBuildInfo), the same for ledgerd, ledgerctl and
// pactagent.
package buildinfo

import (
	"runtime/debug"
	"sync"
)

// Build describes the running binary: its module version and the VCS
// revision it was built from, as the Go toolchain recorded them.
type Build struct {
	// Version is the module version ("v1.2.0", or "(devel)" for a build
	// from a working tree).
	Version string
	// Revision is the VCS revision ("" when the toolchain recorded none).
	Revision string
	// Modified reports uncommitted changes in the working tree at build time.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// String is "v1.2.0 (rev 0123456789ab)", "(devel) (rev 0123456789ab, modified)"
// or "(devel)".
func (b Build) String() string {
	s := b.Version
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (rev " + rev
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s
}

// Read returns the running binary's build, read once from
// runtime/debug.ReadBuildInfo.
var Read = sync.OnceValue(func() Build {
	b := Build{Version: "(devel)"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = info.GoVersion
	if v := info.Main.Version; v != "" {
		b.Version = v
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
})
