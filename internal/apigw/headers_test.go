package apigw

import (
	"fmt"
	"net/http"
	"reflect"
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

	first := FoldHeaders(nil, h)
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
		if got := FoldHeaders(nil, h); !reflect.DeepEqual(got, first) {
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
				got := FoldHeaders(nil, tt.h)
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
	got := FoldHeaders(
		map[string]string{"X-Api-Key": "single", "Host": "api.example.com"},
		map[string][]string{"x-api-key": {"multi"}, "Authorization": {"Bearer a", "Bearer b"}, "X-Empty": {}},
	)
	want := map[string]string{"x-api-key": "single", "host": "api.example.com", "authorization": "Bearer a"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FoldHeaders = %v, want %v", got, want)
	}
}
