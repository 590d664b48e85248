package identity

import (
	"net/netip"
	"strings"
)

// IPv6 prefix lengths of the anonymous identity.
const (
	// DefaultIPv6Prefix is how many leading bits of an IPv6 source address
	// name an anonymous caller: a /64 is what one customer, one LAN or one
	// host is given, and picks any address inside it at will.
	DefaultIPv6Prefix = 64
	// MinIPv6Prefix and MaxIPv6Prefix bound the prefix length. Below /32
	// whole providers would share one limit; /128 counts every address
	// alone.
	MinIPv6Prefix = 32
	MaxIPv6Prefix = 128
)

// sixToFour is the 6to4 range (RFC 3056): 2002:WWXX:YYZZ::/48 is derived
// from the IPv4 address WW.XX.YY.ZZ alone, and its holder may use every
// address of it.
var sixToFour = netip.MustParsePrefix("2002::/16")

// SixToFourIPv4 returns the IPv4 address a 6to4 address (2002::/16, RFC
// 3056) is derived from, bits 16 to 47: 2002:cb00:7107::1 is 203.0.113.7.
// ok is false for any other address.
func SixToFourIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() || !sixToFour.Contains(a) {
		return netip.Addr{}, false
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
}

// SourceForms returns the forms a source address is read in, as
// ParseSource parses it: the address itself and, for a 6to4 address, the
// IPv4 address it is derived from (an IPv4-mapped address is its IPv4
// address, one form). A rule that exempts an address (an unlimited
// network, a network's plan) must hold for every form; a rule that refuses
// one (a blocked network) for any. ok is false when sourceIP does not
// parse.
func SourceForms(sourceIP string) (forms []netip.Addr, ok bool) {
	a, ok := ParseSource(sourceIP)
	if !ok {
		return nil, false
	}
	if v4, ok := SixToFourIPv4(a); ok {
		return []netip.Addr{a, v4}, true
	}
	return []netip.Addr{a}, true
}

// InvalidSource is the address part of the one anonymous identity shared
// by every source address that does not parse ("ip:invalid"). Garbage
// cannot mint a fresh bucket per string: all of it is counted together.
const InvalidSource = "invalid"

// maxSourceIPLen bounds the source addresses parsed at all; the longest
// IPv6 text with a zone is far shorter.
const maxSourceIPLen = 128

// SourceIdentity is the anonymous identity of a source address: "ip:"
// followed by the canonical text of the address. IPv4 addresses, and
// IPv4-mapped IPv6 ones (::ffff:203.0.113.7), are "ip:203.0.113.7"; IPv6
// addresses are counted per prefix of ipv6Prefix bits, written as the
// masked prefix ("ip:2001:db8:1:2::/64"), or alone at 128
// ("ip:2001:db8::1"). Zones (fe80::1%eth0) are dropped, and case and
// zero-compression make no difference. An ipv6Prefix outside
// MinIPv6Prefix..MaxIPv6Prefix means DefaultIPv6Prefix. A 6to4 address
// (2002::/16) is counted as the IPv4 address it is derived from
// (2002:cb00:7107::1 is "ip:203.0.113.7"): the whole /48, 65,536 /64s, is
// what the holder of that one IPv4 address gets, and counting it apart
// would give that holder a second budget (see SourceForms).
//
// ok is false when sourceIP is not an IP address; the identity is then
// "ip:invalid", one identity for every such string.
func SourceIdentity(sourceIP string, ipv6Prefix int) (id string, ok bool) {
	a, ok := ParseSource(sourceIP)
	if !ok {
		return KindIP + InvalidSource, false
	}
	if v4, ok := SixToFourIPv4(a); ok {
		a = v4
	}
	if a.Is4() {
		return KindIP + a.String(), true
	}
	if ipv6Prefix < MinIPv6Prefix || ipv6Prefix > MaxIPv6Prefix {
		ipv6Prefix = DefaultIPv6Prefix
	}
	if ipv6Prefix == MaxIPv6Prefix {
		return KindIP + a.String(), true
	}
	// PrefixFrom cannot fail here: a is IPv6 and the length is within
	// 0..128.
	return KindIP + netip.PrefixFrom(a, ipv6Prefix).Masked().String(), true
}

// ParseSource parses a source address as API Gateway reports it: an IPv4
// or IPv6 address, surrounding spaces ignored, its zone dropped and an
// IPv4-mapped IPv6 address unmapped to IPv4.
func ParseSource(sourceIP string) (netip.Addr, bool) {
	s := strings.TrimSpace(sourceIP)
	if s == "" || len(s) > maxSourceIPLen {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}
