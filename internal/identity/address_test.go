package identity_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/identity"
)

func TestSourceIdentity(t *testing.T) {
	cases := []struct {
		name   string
		source string
		prefix int
		want   string
		ok     bool
	}{
		{"IPv4 as is", "203.0.113.7", 64, "ip:203.0.113.7", true},
		{"IPv4 with spaces", " 203.0.113.7 ", 64, "ip:203.0.113.7", true},
		{"IPv4-mapped IPv6 is IPv4", "::ffff:203.0.113.7", 64, "ip:203.0.113.7", true},
		{"IPv4-mapped IPv6 in hex is IPv4", "::FFFF:cb00:7107", 128, "ip:203.0.113.7", true},
		{"IPv6 per /64", "2001:db8:1:2:3:4:5:6", 64, "ip:2001:db8:1:2::/64", true},
		{"IPv6 zero-padded upper case", "2001:0DB8:0001:0002:0003:0004:0005:0006", 64, "ip:2001:db8:1:2::/64", true},
		{"IPv6 zone dropped", "fe80::1%eth0", 64, "ip:fe80::/64", true},
		{"IPv6 per /48", "2001:db8:1:2::1", 48, "ip:2001:db8:1::/48", true},
		{"IPv6 per /128 is the address", "2001:0db8:0:0::1", 128, "ip:2001:db8::1", true},
		{"IPv6 zone dropped at /128", "fe80::1%25eth0", 128, "ip:fe80::1", true},
		{"prefix out of range means /64", "2001:db8:1:2::1", 8, "ip:2001:db8:1:2::/64", true},
		// One IPv4 address holds a 6to4 /48 (2002:cb00:7107::/48 is
		// 203.0.113.7's): 65,536 /64s, one caller, the IPv4 address's
		// (issue 20, hole 4: it was "ip:2002:cb00:7107::/48", a second
		// bucket beside "ip:203.0.113.7").
		{"6to4 is its IPv4 address", "2002:cb00:7107:1::1", 64, "ip:203.0.113.7", true},
		{"6to4 is its IPv4 address at /128", "2002:cb00:7107:ffff::2", 128, "ip:203.0.113.7", true},
		{"6to4 is its IPv4 address at /32", "2002:cb00:7107:1::1", 32, "ip:203.0.113.7", true},
		// Teredo keeps the server's IPv4 address in its /64 and NAT64 the
		// client's in its last 32 bits: many callers in one /64, never
		// one caller in many.
		{"Teredo per /64", "2001:0:4136:e378:8000:63bf:3fff:fdd2", 64, "ip:2001:0:4136:e378::/64", true},
		{"NAT64 per /64", "64:ff9b::cb00:7107", 64, "ip:64:ff9b::/64", true},
		{"IPv4-compatible per /64", "::203.0.113.7", 64, "ip:::/64", true},
		{"IPv4 ignores the prefix", "198.51.100.1", 32, "ip:198.51.100.1", true},
		{"empty", "", 64, "ip:invalid", false},
		{"console test invoke", "test-invoke-source-ip", 64, "ip:invalid", false},
		{"IPv4 with leading zeros", "203.0.113.07", 64, "ip:invalid", false},
		{"IPv4 with a zone", "203.0.113.7%eth0", 64, "ip:invalid", false},
		{"with a port", "203.0.113.7:443", 64, "ip:invalid", false},
		{"a prefix, not an address", "2001:db8::/64", 64, "ip:invalid", false},
		{"the invalid bucket's own name", "invalid", 64, "ip:invalid", false},
		{"very long", strings.Repeat("1", 1000), 64, "ip:invalid", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := identity.SourceIdentity(tc.source, tc.prefix)
			if got != tc.want || ok != tc.ok {
				t.Errorf("SourceIdentity(%q, %d) = %q, %v; want %q, %v", tc.source, tc.prefix, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzSourceIdentity: whatever the source address, the identity is
// "ip:invalid" or the canonical text of a valid address or prefix, and
// parsing it again gives the same identity (canonical forms are fixed
// points), for every prefix length.
func FuzzSourceIdentity(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "::ffff:203.0.113.7", "2001:db8::1", "fe80::1%eth0", "2001:0DB8:0:0::1", "", "test-invoke-source-ip", "::", "1.2.3.4%x", "[::1]"} {
		f.Add(s, 64)
	}
	f.Add("2001:db8:1:2::1", 128)
	f.Add("2001:db8:1:2::1", 31)
	f.Fuzz(func(t *testing.T, source string, prefix int) {
		id, ok := identity.SourceIdentity(source, prefix)
		rest, found := strings.CutPrefix(id, identity.KindIP)
		if !found {
			t.Fatalf("identity %q lacks %q", id, identity.KindIP)
		}
		if !ok {
			if rest != identity.InvalidSource {
				t.Fatalf("invalid source %q gave %q", source, id)
			}
			return
		}
		if strings.Contains(rest, "%") {
			t.Fatalf("identity %q keeps a zone", id)
		}
		var again string
		if p, err := netip.ParsePrefix(rest); err == nil {
			if !p.Addr().Is6() || p != p.Masked() || p.Bits() < identity.MinIPv6Prefix || p.Bits() >= identity.MaxIPv6Prefix {
				t.Fatalf("identity %q of %q is not a masked IPv6 prefix in range", id, source)
			}
			again, ok = identity.SourceIdentity(p.Addr().String(), p.Bits())
		} else {
			a, err := netip.ParseAddr(rest)
			if err != nil || a.Is4In6() || a.Zone() != "" || a.String() != rest {
				t.Fatalf("identity %q of %q is not a canonical address: %v", id, source, err)
			}
			again, ok = identity.SourceIdentity(rest, prefix)
		}
		if !ok || again != id {
			t.Fatalf("identity %q of %q is not a fixed point: %q, %v", id, source, again, ok)
		}
	})
}
