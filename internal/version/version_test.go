package version

import (
	"runtime/debug"
	"testing"
)

// TestResolve: the linker's stamp wins; without it the module version Go
// recorded; without that (a test binary, a build outside a module) "dev".
func TestResolve(t *testing.T) {
	info := func(v string, ok bool) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			if !ok {
				return nil, false
			}
			return &debug.BuildInfo{Main: debug.Module{Path: "github.com/slidegate/slidegate", Version: v}}, true
		}
	}
	cases := []struct {
		name, stamp string
		info        func() (*debug.BuildInfo, bool)
		want        string
	}{
		{"stamped at build", "v0.1.0-3-gabc1234-dirty", info("v0.1.0", true), "v0.1.0-3-gabc1234-dirty"},
		{"go install at a tag", "", info("v0.1.0", true), "v0.1.0"},
		{"go build in a clone", "", info("v0.1.1-0.20261201230000-abcdef123456+dirty", true), "v0.1.1-0.20261201230000-abcdef123456+dirty"},
		{"no version recorded", "", info("(devel)", true), "dev"},
		{"empty version", "", info("", true), "dev"},
		{"no build information", "", info("", false), "dev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.stamp, tc.info); got != tc.want {
				t.Errorf("resolve(%q) = %q, want %q", tc.stamp, got, tc.want)
			}
		})
	}
}
