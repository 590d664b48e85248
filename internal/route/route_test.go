package route_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/route"
)

// TestGlobMatchesEverySpellingOfAPath: the default login glob holds every
// spelling a router may serve as /auth/login, and no spelling is looser
// than the plain path.
func TestGlobMatchesEverySpellingOfAPath(t *testing.T) {
	auth, err := route.ParsePathGlob("/auth/*")
	if err != nil {
		t.Fatal(err)
	}
	login, err := route.ParsePathGlob("/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path             string
		wantAuth, wantLo bool
	}{
		{"/auth/login", true, true},
		{"/%61uth/login", true, true},
		{"/%61%75%74%68/%6c%6f%67%69%6e", true, true},
		{"/%41uth/login", false, false}, // %41 is 'A': paths are case-sensitive
		{"/auth/log%69n", true, true},
		{"/auth%2Flogin", true, true}, // ServeMux: one segment; a decoding router: two
		{"/auth%2flogin", true, true},
		{"/auth/login%2F", true, true},
		{"/auth/./login", true, true},
		{"/./auth/login", true, true},
		{"/auth/%2e/login", true, true},
		{"/x/../auth/login", true, true},
		{"/x/%2e%2e/auth/login", true, true},
		{"/x/%2E%2E/auth/login", true, true},
		{"/auth/%2e%2e/x", true, false}, // ServeMux keeps "%2e%2e" a segment under /auth
		{"/../auth/login", true, true},
		{"//auth/login", true, true},
		{"/auth//login", true, true},
		{"///auth///login///", true, true},
		{"/auth/login/", true, true},
		{"auth/login", true, true},
		{"/auth/login?x", true, true}, // an HTTP API decodes %3F; the proxy library cuts there
		{"/auth/login#x", true, true},
		{"/auth/login%3Fx", true, false},
		{"/%2561uth/login", false, false}, // %25 is '%': decoded once, "%61uth"
		{"/auth/login%zz", true, false},   // does not decode: the API answers 400
		{"/auth/login%", true, false},
		{"/auth/login%00", true, false},
		{"/auth/login%ff", true, false},
		{"/Auth/login", false, false},
		{"/authx/login", false, false},
		{"/auth", false, false},
		{"/", false, false},
		{"", false, false},
	}
	for _, tc := range cases {
		if got := route.ParsePath(tc.path).Matches(auth); got != tc.wantAuth {
			t.Errorf("/auth/* matches %q = %v, want %v", tc.path, got, tc.wantAuth)
		}
		if got := route.ParsePath(tc.path).Matches(login); got != tc.wantLo {
			t.Errorf("/auth/login matches %q = %v, want %v", tc.path, got, tc.wantLo)
		}
	}
}

func TestPathGlob(t *testing.T) {
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"/auth/*", "/auth/login", true},
		{"/auth/*", "/auth/oauth/callback", true},
		{"/auth/*", "/auth", false},
		{"/auth/*", "/auth/", false},
		{"/auth/*", "//auth//login/", true},
		{"/auth/*", "/authx/login", false},
		{"/auth/*", "/Auth/login", false},
		{"/auth/**", "/auth", true},
		{"/auth/**", "/auth/a/b", true},
		{"/v1/*/items", "/v1/42/items", true},
		{"/v1/*/items", "/v1/42/43/items", false},
		{"/v1/*/items", "/v1//items", false},
		{"/health", "/health", true},
		{"/health", "/health/", true},
		{"/health", "/healthz", false},
		{"/**", "/", true},
		{"/*", "/", false},
		{"/*", "/x/y", true},
		{"/auth/*", "auth/login", true}, // served with a leading '/' by the proxy library
	}
	for _, tc := range cases {
		g, err := route.ParsePathGlob(tc.glob)
		if err != nil {
			t.Fatalf("ParsePathGlob(%q): %v", tc.glob, err)
		}
		if got := route.ParsePath(tc.path).Matches(g); got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.glob, tc.path, got, tc.want)
		}
	}
	for _, bad := range []string{"auth/*", "/a/**/b", "/a/b*", "/a b", ""} {
		if _, err := route.ParsePathGlob(bad); err == nil {
			t.Errorf("ParsePathGlob(%q) accepted", bad)
		}
	}
}

// encodeAll percent-encodes every byte of p but '/'.
func encodeAll(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			b.WriteByte('/')
			continue
		}
		fmt.Fprintf(&b, "%%%02X", p[i])
	}
	return b.String()
}

// FuzzRequestPath: reading a path never panics, and no encoding of a path
// escapes a glob the plain path matches.
func FuzzRequestPath(f *testing.F) {
	for _, s := range []string{"/auth/login", "/auth/./login", "/a/../auth/login", "//auth//login/", "/auth%2Flogin", "/%61uth/login", "/auth/login%zz", "/auth/login?x", ""} {
		f.Add("/auth/*", s)
		f.Add("/auth/login", s)
	}
	f.Add("/**", "/%")
	f.Add("/a/*/b", "/a/%2e%2e/b")
	f.Fuzz(func(t *testing.T, glob, path string) {
		g, err := route.ParsePathGlob(glob)
		if err != nil {
			return
		}
		plain := route.ParsePath(path).Matches(g)
		_ = route.ParsePath(path).Segments()
		if plain && !strings.ContainsAny(path, "%?#") && !route.ParsePath(encodeAll(path)).Matches(g) {
			t.Fatalf("%q matches %q but its encoding %q does not", glob, path, encodeAll(path))
		}
	})
}
