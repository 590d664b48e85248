package identity

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/slidegate/slidegate/internal/truncate"
)

// ErrNotCanonical marks an identity that names a caller in another form
// than the functions count it (CanonicalIdentity): its error says which
// identity to send instead.
var ErrNotCanonical = errors.New("not the identity the functions count")

// KindHash starts an identity given as its hash: "hash:" and the 32 hex
// digits (lower case) that the functions' logs, their metrics'
// Contributor Insights rules and the dashboard print as a caller's
// "identity" (Hasher.Hash). It names a caller nobody can name otherwise
// from those places; pkg/ratelimit reads it under
// ratelimit.Options.HashedIdentities, which only the operator's
// connection sets.
const KindHash = "hash:"

// HashLen is the length of a hashed identity in hex (Hasher.Hash).
const HashLen = 32

// CanonicalIdentity is the identity the functions count for id, as an
// operator names a caller for a live control or an inspection: the one
// reading of an identity for every way into the controls (the slidegate
// command's flags, the operator function's requests), so that a control
// names exactly the identity a decision reads.
//
//   - "ip:" and an address: the address as SourceIdentity counts it
//     under ipv6Prefix (surrounding spaces and a zone dropped, IPv4-mapped
//     and 6to4 addresses as their IPv4 address, IPv6 masked to its
//     prefix): "ip:2001:DB8:1:2::5" is "ip:2001:db8:1:2::/64" at /64.
//   - "ip:" and an IPv6 prefix: only of ipv6Prefix bits (another length is
//     never counted), read as its first address is.
//   - "ip:invalid": the one identity of every source address that does
//     not parse (InvalidSource).
//   - "key:" and an API key's SHA-256 as 64 hex digits, lower case.
//   - "sub:" and a token's subject, as it is (a subject is exact).
//   - the identity's hash as the logs print it (32 hex digits), alone or
//     after "hash:": "hash:" and the digits in lower case (KindHash). The
//     hash says neither the tier nor the address: it names the keys.
//
// ipv6Prefix outside MinIPv6Prefix..MaxIPv6Prefix means
// DefaultIPv6Prefix, as for SourceIdentity. Anything else is an error
// that says what to send. A caller that must act only on an identity
// already canonical compares the result with id (see ErrNotCanonical).
func CanonicalIdentity(id string, ipv6Prefix int) (string, error) {
	if ipv6Prefix < MinIPv6Prefix || ipv6Prefix > MaxIPv6Prefix {
		ipv6Prefix = DefaultIPv6Prefix
	}
	switch {
	case strings.HasPrefix(id, KindIP):
		return canonicalSource(strings.TrimPrefix(id, KindIP), ipv6Prefix)
	case strings.HasPrefix(id, KindKey):
		h := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(id, KindKey)))
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return "", fmt.Errorf("identity %q: want key: and the API key's SHA-256 as 64 hex digits", truncate.Text(id, truncate.QuotedLen))
		}
		return KindKey + h, nil
	case strings.HasPrefix(id, KindHash) || isHash(strings.TrimSpace(id)):
		h := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(id, KindHash)))
		if !isHash(h) {
			return "", fmt.Errorf("identity %q: want hash: and the identity's hash as the logs print it, %d hex digits", truncate.Text(id, truncate.QuotedLen), HashLen)
		}
		return KindHash + h, nil
	case strings.HasPrefix(id, KindSubject):
		if id == KindSubject {
			return "", fmt.Errorf("identity %q: want sub: and the token's subject", id)
		}
		return id, nil
	}
	return "", fmt.Errorf("identity %q does not start with a kind (ip, key or sub) and a colon: want ip:<address or IPv6 /%d prefix>, key:<sha256 hex>, sub:<subject> or the %d-hex-digit hash the logs print", truncate.Text(id, truncate.QuotedLen), ipv6Prefix, HashLen)
}

// isHash reports whether s is HashLen hex digits, of either case.
func isHash(s string) bool {
	return len(s) == HashLen && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// canonicalSource is CanonicalIdentity of "ip:" and s.
func canonicalSource(s string, ipv6Prefix int) (string, error) {
	if s == InvalidSource {
		return KindIP + InvalidSource, nil // every address that does not parse
	}
	addr, bits, isPrefix := strings.Cut(strings.TrimSpace(s), "/")
	if !isPrefix {
		id, ok := SourceIdentity(s, ipv6Prefix)
		if !ok {
			return "", fmt.Errorf("identity %q: not an IP address", truncate.Text(KindIP+s, truncate.QuotedLen))
		}
		return id, nil
	}
	p, err := netip.ParsePrefix(addr + "/" + bits)
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return "", fmt.Errorf("identity %q: an anonymous caller is one IPv4 address, or one IPv6 address or /%d prefix (a network's control takes the network field, slidegate's --network)",
			truncate.Text(KindIP+s, truncate.QuotedLen), ipv6Prefix)
	}
	if p.Bits() != ipv6Prefix {
		return "", fmt.Errorf("identity %q: IPv6 callers are counted per /%d prefix (RATE_LIMIT_IPV6_PREFIX): a /%d prefix is never counted",
			truncate.Text(KindIP+s, truncate.QuotedLen), ipv6Prefix, p.Bits())
	}
	id, _ := SourceIdentity(p.Addr().String(), ipv6Prefix)
	return id, nil
}
