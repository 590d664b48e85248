package apihandler

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestIsCleanPathMatchesServeMux: every path isCleanPath calls clean is
// served by ServeMux without a redirect, and every path it refuses is one
// ServeMux would redirect (or cannot route); "//" was served as "/" plus a
// trailing slash and answered 307 with an HTML body.
func TestIsCleanPathMatchesServeMux(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	cases := []struct {
		path  string
		clean bool
	}{
		{"/", true},
		{"/v1/items", true},
		{"/v1/items/", true},
		{"//", false},
		{"///", false},
		{"//v1/items", false},
		{"/v1//items", false},
		{"/v1/items//", false},
		{"/v1/./items", false},
		{"/v1/../items", false},
		{"/v1/items/.", false},
		{"", false},
		{"v1/items", false},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			if got := isCleanPath(c.path); got != c.clean {
				t.Fatalf("isCleanPath(%q) = %v, want %v", c.path, got, c.clean)
			}
			if !c.clean || c.path == "" {
				return
			}
			r := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
			r.URL.Path = c.path
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("ServeMux answered %d for %q, which isCleanPath calls clean", w.Code, c.path)
			}
		})
	}
}
