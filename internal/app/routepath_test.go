package app

import "testing"

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

func TestServedPath(t *testing.T) {
	tests := []struct {
		name, resource, path, want string
	}{
		{"literal resource: the resource alone", "/auth/login", "/api/auth/login", ""},
		{"parameter: the path too", "/{section}/{action}", "/auth/login", "/auth/login"},
		{"parameter after a literal: the path too", "/auth/{action}", "/auth/login", "/auth/login"},
		{"greedy resource: the path alone", "/{proxy+}", "/auth/login", ""},
		{"no resource: the path alone", "", "/auth/login", ""},
	}
	for _, tt := range tests {
		if got := ServedPath(tt.resource, tt.path); got != tt.want {
			t.Errorf("%s: ServedPath(%q, %q) = %q, want %q", tt.name, tt.resource, tt.path, got, tt.want)
		}
	}
}
