// Package version is the version of the slidegate binary running: stamped
// at build, so that an operator can tell which release decided a request
// (the functions log it at cold start and in every decision line) and which
// release their command is (`slidegate version`).
//
// The build stamps it with
//
//	go build -ldflags "-X github.com/slidegate/slidegate/internal/version.stamp=v0.1.0"
//
// as mk/functions.mk and the Makefile do, from `git describe --tags --always
// --dirty`. A binary built without the stamp reports the module version Go
// recorded (v0.1.0 for `go install .../cmd/slidegate@v0.1.0`, a
// pseudo-version or "vX.Y.Z+dirty" for `go build` in a clone), or "dev"
// when there is none.
package version

import "runtime/debug"

// stamp is set by the linker (-X); empty in a binary built without it.
var stamp string

// ImportPath is the package's import path, the prefix of the -X flag.
const ImportPath = "github.com/slidegate/slidegate/internal/version"

// Version returns the binary's version: the stamp, else the main module's
// version from the build information, else "dev".
func Version() string {
	return resolve(stamp, debug.ReadBuildInfo)
}

// resolve is Version with its sources passed in, for tests.
func resolve(stamped string, buildInfo func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	if info, ok := buildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}
