package identity_test

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/identity"
)

// TestCanonicalIdentity (issue 37, hole 3): every way of naming a caller
// for a control reads to the identity the functions count, or to an error
// saying what to send; the canonical form reads to itself.
func TestCanonicalIdentity(t *testing.T) {
	hash := identity.KeyHash("k")
	logged := identity.Hash("ip:203.0.113.7")
	for _, tc := range []struct {
		id     string
		prefix int
		want   string // "" for an error
	}{
		{"ip:203.0.113.7", 64, "ip:203.0.113.7"},
		{"ip:203.0.113.9 ", 64, "ip:203.0.113.9"},
		{"ip:::ffff:203.0.113.7", 64, "ip:203.0.113.7"},
		{"ip:2002:cb00:7107::1", 64, "ip:203.0.113.7"},
		{"ip:2002:cb00:7107:5::/64", 64, "ip:203.0.113.7"},
		{"ip:2001:db8:1:2::5", 64, "ip:2001:db8:1:2::/64"},
		{"ip:2001:DB8:1:2::/64", 64, "ip:2001:db8:1:2::/64"},
		{"ip:2001:db8:1:2::/64", 64, "ip:2001:db8:1:2::/64"},
		{"ip:2001:db8:1:2::5", 128, "ip:2001:db8:1:2::5"},
		{"ip:2001:db8:1:2::5/128", 128, "ip:2001:db8:1:2::5"},
		{"ip:2001:db8:1:2::/56", 56, "ip:2001:db8:1::/56"},
		{"ip:fe80::1%eth0", 128, "ip:fe80::1"},
		{"ip:2001:db8:1:2::/56", 64, ""},
		{"ip:2001:db8:1:2::5/128", 64, ""},
		{"ip:203.0.113.0/24", 64, ""},
		{"ip:::ffff:203.0.113.0/120", 64, ""},
		{"ip:", 64, ""},
		{"ip:invalid", 64, "ip:invalid"},
		{"key:" + strings.ToUpper(hash), 64, "key:" + hash},
		{"key:" + hash, 64, "key:" + hash},
		{"key:abc", 64, ""},
		{"sub:alice", 64, "sub:alice"},
		{"sub:", 64, ""},
		{"203.0.113.7", 64, ""},
		{"IP:203.0.113.7", 64, ""},
		{"", 64, ""},
		// The hash the logs print, as printed or after hash: (issue 41).
		{logged, 64, "hash:" + logged},
		{" " + strings.ToUpper(logged) + " ", 64, "hash:" + logged},
		{"hash:" + logged, 64, "hash:" + logged},
		{"hash:" + strings.ToUpper(logged), 64, "hash:" + logged},
		{"hash:" + logged[:31], 64, ""},
		{"hash:" + logged + "0", 64, ""},
		{logged[:31] + "g", 64, ""},
		{"hash:", 64, ""},
		{"hash-key-unavailable", 64, ""},
	} {
		got, err := identity.CanonicalIdentity(tc.id, tc.prefix)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("CanonicalIdentity(%q, %d) = %q, want an error", tc.id, tc.prefix, got)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("CanonicalIdentity(%q, %d) = %q, %v; want %q", tc.id, tc.prefix, got, err, tc.want)
		case tc.want != "":
			if again, err := identity.CanonicalIdentity(got, tc.prefix); err != nil || again != got {
				t.Errorf("CanonicalIdentity(%q) = %q, %v: the canonical form is not its own", got, again, err)
			}
		}
	}
}

// FuzzCanonicalIdentity: any identity reads to an error or to a canonical
// identity that reads to itself; an address reads to what the functions
// count for it (SourceIdentity).
func FuzzCanonicalIdentity(f *testing.F) {
	for _, s := range []string{"ip:2001:db8:1:2::5", "ip:2002:cb00:7107::/64", "key:AB", "sub:x", "ip:::ffff:1.2.3.4 ", "ip:1.2.3.4/32"} {
		f.Add(s, 64)
	}
	f.Fuzz(func(t *testing.T, id string, prefix int) {
		got, err := identity.CanonicalIdentity(id, prefix)
		if err != nil {
			return
		}
		if again, err := identity.CanonicalIdentity(got, prefix); err != nil || again != got {
			t.Fatalf("%q reads to %q, which reads to %q, %v", id, got, again, err)
		}
		if rest, ok := strings.CutPrefix(id, identity.KindIP); ok && !strings.Contains(rest, "/") {
			if want, _ := identity.SourceIdentity(rest, prefix); got != want {
				t.Fatalf("%q reads to %q, the functions count %q", id, got, want)
			}
		}
	})
}
