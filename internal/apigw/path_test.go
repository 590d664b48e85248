package apigw

import (
	"slices"
	"strings"
	"testing"
)

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
		if got := LimitPath(tt.resource, tt.path); got != tt.want {
			t.Errorf("%s: LimitPath(%q, %q) = %q, want %q", tt.name, tt.resource, tt.path, got, tt.want)
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
		if got := ServedPaths(tt.resource, tt.path, tt.params); !slices.Equal(got, tt.want) {
			t.Errorf("%s: ServedPaths(%q, %q, %v) = %q, want %q", tt.name, tt.resource, tt.path, tt.params, got, tt.want)
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
		limit := LimitPath(resource, path)
		for _, p := range ServedPaths(resource, path, map[string]string{name: value}) {
			if p == limit {
				t.Fatalf("ServedPaths(%q, %q) repeats LimitPath %q", resource, path, limit)
			}
			if p != path && !strings.HasPrefix(p, "/") {
				t.Fatalf("ServedPaths(%q, %q) gave %q", resource, path, p)
			}
		}
	})
}
