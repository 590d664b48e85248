package config

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// FuzzParseRate: any string either parses into a limit that validates as a
// fixed window (the algorithm with no bound on count x window; any other
// algorithm accepts it or names itself and the bound) and renders back to
// the same limit, or is rejected with an error that quotes at most a
// bounded part of it. It never panics.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"30/1m", "5/10s", "10000/1h", "100/m", " 7 / 250ms ", "0/1s", "1/0s", "-1/1m", "1/1ns", "1e3/1m", "9999999999999999999/1s", "1/9223372036854775807ns", "100000/24h", "1000000/8784h", "/", "30", "30/1m/1m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		count, window, err := ParseRate(s)
		if err != nil {
			if len(err.Error()) > 400 {
				t.Fatalf("error message of %d bytes for a %d-byte input", len(err.Error()), len(s))
			}
			return
		}
		l := ratelimit.Limit{Name: "fuzz", Count: count, Window: window, Algorithm: ratelimit.FixedWindow}
		if verr := l.Validate(); verr != nil {
			t.Fatalf("ParseRate(%q) = %d/%v, which does not validate: %v", s, count, window, verr)
		}
		for _, a := range ratelimit.Algorithms() {
			other := l
			other.Algorithm = a
			if verr := other.Validate(); verr != nil && (!strings.Contains(verr.Error(), string(a)) || !strings.Contains(verr.Error(), "2^50")) {
				t.Fatalf("ParseRate(%q) = %d/%v, refused as %s without naming it and the bound: %v", s, count, window, a, verr)
			}
		}
		c2, w2, err := ParseRate(l.String())
		if err != nil || c2 != count || w2 != window {
			t.Fatalf("ParseRate(%q) = %d/%v renders as %q, which parses to %d/%v (%v)", s, count, window, l.String(), c2, w2, err)
		}
	})
}
