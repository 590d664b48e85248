package apigw

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestFoldHeadersKeepsCredentials: a request with more headers than
// maxHeaders keeps its x-api-key and Authorization whatever their names
// sort like, and the others it keeps are the same on every call (the first
// by sorted name), never chosen by map iteration order.
func TestFoldHeadersKeepsCredentials(t *testing.T) {
	h := http.Header{}
	for i := range 2 * maxHeaders {
		// Names on both sides of the credentials' in sorted order.
		h.Set(fmt.Sprintf("A-Pad-%03d", i), "x")
		h.Set(fmt.Sprintf("Z-Pad-%03d", i), "x")
	}
	h.Set("X-Api-Key", "unknown-key")
	h.Set("Authorization", "Bearer not-a-jwt")
	h["X-Empty"] = nil

	first := foldHeaders(nil, h)
	if len(first) != maxHeaders {
		t.Fatalf("kept %d headers, want %d", len(first), maxHeaders)
	}
	if first["x-api-key"] != "unknown-key" || first["authorization"] != "Bearer not-a-jwt" {
		t.Fatalf("credentials dropped: x-api-key %q, authorization %q", first["x-api-key"], first["authorization"])
	}
	for i := range maxHeaders - 2 {
		if name := fmt.Sprintf("a-pad-%03d", i); first[name] != "x" {
			t.Fatalf("%s missing: the kept headers are not the first by sorted name", name)
		}
	}
	for range 50 {
		if got := foldHeaders(nil, h); !reflect.DeepEqual(got, first) {
			t.Fatal("the same headers gave a different apigw.Request")
		}
	}

	t.Run("names differing only in case: the lower-case one, else the first in sorted order", func(t *testing.T) {
		tests := []struct {
			h    http.Header
			want string
		}{
			{http.Header{"X-API-KEY": {"upper"}, "X-Api-Key": {"canonical"}, "x-api-key": {"lower"}}, "lower"},
			{http.Header{"X-API-KEY": {"upper"}, "X-Api-Key": {"canonical"}}, "upper"},
			{http.Header{"X-PAD": {"upper"}, "x-pad": {"lower"}}, "lower"},
		}
		for _, tt := range tests {
			for range 50 {
				got := foldHeaders(nil, tt.h)
				if v := got["x-api-key"] + got["x-pad"]; v != tt.want {
					t.Fatalf("%v read as %q, want %q", tt.h, v, tt.want)
				}
			}
		}
	})
}

// TestFoldHeadersSingleAndMulti: an event's single-value headers win over
// its multi-value ones; a header only in the multi-value map gives its
// first value; names are folded by the same rule in both.
func TestFoldHeadersSingleAndMulti(t *testing.T) {
	got := foldHeaders(
		map[string]string{"X-Api-Key": "single", "Host": "api.example.com"},
		map[string][]string{"x-api-key": {"multi"}, "Authorization": {"Bearer a", "Bearer b"}, "X-Empty": {}},
	)
	want := map[string]string{"x-api-key": "single", "host": "api.example.com", "authorization": "Bearer a"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("foldHeaders = %v, want %v", got, want)
	}
}

func TestLimitPath(t *testing.T) {
	tests := []struct {
		name, resource, path, want string
	}{
		{"resource wins over a base path", "/auth/login", "/api/auth/login", "/auth/login"},
		{"parameters stay segments", "/items/{id}", "/v2/items/42", "/items/{id}"},
		{"greedy resource: the path", "/{proxy+}", "/auth/login", "/auth/login"},
		{"greedy under a prefix: the path", "/auth/{proxy+}", "/auth/login", "/auth/login"},
		{"no resource: the path", "", "/auth/login", "/auth/login"},
		{"malformed resource: the path", "auth/login", "/auth/login", "/auth/login"},
	}
	for _, tt := range tests {
		if got := limitPath(tt.resource, tt.path); got != tt.want {
			t.Errorf("%s: limitPath(%q, %q) = %q, want %q", tt.name, tt.resource, tt.path, got, tt.want)
		}
	}
}

func TestServedPaths(t *testing.T) {
	tests := []struct {
		name, resource, path string
		params               map[string]string
		want                 []string
	}{
		{"literal resource: the resource alone", "/auth/login", "/api/auth/login", nil, nil},
		{"parameter: the path too", "/{section}/{action}", "/auth/login", nil, []string{"/auth/login"}},
		{"parameter after a literal: the path too", "/auth/{action}", "/auth/login", nil, []string{"/auth/login"}},
		{"greedy resource without parameters: the path alone", "/{proxy+}", "/auth/login", nil, nil},
		{"greedy resource: the same path filled in", "/{proxy+}", "/auth/login", map[string]string{"proxy": "auth/login"}, nil},
		{"greedy resource under a base path: filled in", "/{proxy+}", "/v2/auth/login", map[string]string{"proxy": "auth/login"}, []string{"/auth/login"}},
		{"greedy under a prefix, base path: filled in", "/auth/{proxy+}", "/v2/auth/login", map[string]string{"proxy": "login"}, []string{"/auth/login"}},
		{"parameters under a base path: both", "/{section}/{action}", "/v2/auth/login", map[string]string{"section": "auth", "action": "login"}, []string{"/v2/auth/login", "/auth/login"}},
		{"decoded parameters are escaped again", "/{proxy+}", "/v2/a%2Fb/c%25d", map[string]string{"proxy": "a/b/c%d"}, []string{"/a/b/c%25d"}},
		{"a parameter missing: not filled in", "/{a}/{b}", "/x/y", map[string]string{"a": "x"}, []string{"/x/y"}},
		{"no resource: the path alone", "", "/auth/login", map[string]string{"proxy": "auth/login"}, nil},
	}
	for _, tt := range tests {
		if got := servedPaths(tt.resource, tt.path, tt.params); !slices.Equal(got, tt.want) {
			t.Errorf("%s: servedPaths(%q, %q, %v) = %q, want %q", tt.name, tt.resource, tt.path, tt.params, got, tt.want)
		}
	}
}

// FuzzServedPaths: whatever the resource, path and parameters of an event,
// ServedPaths answers without panicking, never repeats LimitPath, and
// every path it gives starts with '/' when the resource or path does.
func FuzzServedPaths(f *testing.F) {
	f.Add("/{proxy+}", "/v2/auth/login", "proxy", "auth/login")
	f.Add("/{a}/{b}", "/x/y", "a", "x")
	f.Add("/{", "/", "", "")
	f.Add("/{+}", "/%zz", "", "a/../b")
	f.Fuzz(func(t *testing.T, resource, path, name, value string) {
		limit := limitPath(resource, path)
		for _, p := range servedPaths(resource, path, map[string]string{name: value}) {
			if p == limit {
				t.Fatalf("servedPaths(%q, %q) repeats LimitPath %q", resource, path, limit)
			}
			if p != path && !strings.HasPrefix(p, "/") {
				t.Fatalf("servedPaths(%q, %q) gave %q", resource, path, p)
			}
		}
	})
}
