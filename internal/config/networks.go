package config

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/slidegate/slidegate/internal/clip"
	"github.com/slidegate/slidegate/internal/identity"
)

// The plans of RATE_LIMIT_NETWORKS that are not limits.
const (
	// NetworkUnlimited exempts a network: its requests are admitted
	// without a Redis call (a company's own monitors, say).
	NetworkUnlimited = "unlimited"
	// NetworkBlocked refuses a network's requests without a Redis call.
	NetworkBlocked = "blocked"
)

// maxNetworks bounds RATE_LIMIT_NETWORKS.
const maxNetworks = 1024

// Networks maps source networks to a plan (RATE_LIMIT_NETWORKS). The zero
// value maps nothing.
type Networks struct {
	// entries are sorted longest prefix first, so the first match is the
	// most specific.
	entries []networkEntry
}

type networkEntry struct {
	prefix netip.Prefix
	plan   string
}

// ParseNetworks parses RATE_LIMIT_NETWORKS: comma-separated entries
// "CIDR=plan", IPv4 or IPv6 ("10.0.0.0/8=unlimited,192.0.2.0/24=blocked,
// 2001:db8::/32=partner"); a bare address is a network of one. The plan is
// NetworkUnlimited, NetworkBlocked or a plan name. Host bits of a CIDR are
// ignored (10.1.2.3/8 is 10.0.0.0/8). When networks overlap, the longest
// prefix wins. The empty string and "none" map nothing. Any bad entry
// fails the whole value, naming the entry.
func ParseNetworks(s string) (Networks, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, None) {
		return Networks{}, nil
	}
	var n Networks
	seen := make(map[netip.Prefix]bool)
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		cidr, rawPlan, ok := strings.Cut(entry, "=")
		if !ok {
			return Networks{}, fmt.Errorf("network %q: want CIDR=plan, like 10.0.0.0/8=unlimited", clip.Text(entry, clip.QuotedLen))
		}
		prefix, err := parseNetwork(strings.TrimSpace(cidr))
		if err != nil {
			return Networks{}, fmt.Errorf("network %q: %w", clip.Text(entry, clip.QuotedLen), err)
		}
		plan, ok := identity.NormalizePlan(rawPlan)
		if !ok {
			return Networks{}, fmt.Errorf("network %q: plan %q: want %s, %s or a plan name (letters, digits, underscores)",
				clip.Text(entry, clip.QuotedLen), clip.Text(strings.TrimSpace(rawPlan), clip.QuotedLen), NetworkUnlimited, NetworkBlocked)
		}
		if seen[prefix] {
			return Networks{}, fmt.Errorf("network %q: %s is given twice", clip.Text(entry, clip.QuotedLen), prefix)
		}
		seen[prefix] = true
		n.entries = append(n.entries, networkEntry{prefix: prefix, plan: plan})
	}
	if len(n.entries) > maxNetworks {
		return Networks{}, fmt.Errorf("more than %d networks", maxNetworks)
	}
	sort.SliceStable(n.entries, func(i, j int) bool { return n.entries[i].prefix.Bits() > n.entries[j].prefix.Bits() })
	return n, nil
}

// parseNetwork parses a CIDR or a bare address, IPv4-mapped IPv6 forms
// read as IPv4.
func parseNetwork(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR nor an IP address", clip.Text(s, clip.QuotedLen))
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR: %w", clip.Text(s, clip.QuotedLen), err)
	}
	if a := p.Addr(); a.Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			return netip.Prefix{}, fmt.Errorf("%q: an IPv4-mapped prefix shorter than /96", clip.Text(s, clip.QuotedLen))
		}
		p = netip.PrefixFrom(a.Unmap(), bits)
	}
	return p.Masked(), nil
}

// Lookup returns the plan of the most specific network holding the source
// address ip (as API Gateway reports it; IPv4-mapped IPv6 is read as
// IPv4), and false when none does or ip does not parse.
func (n Networks) Lookup(ip string) (plan string, ok bool) {
	if len(n.entries) == 0 {
		return "", false
	}
	a, err := netip.ParseAddr(strings.TrimSpace(ip))
	if err != nil {
		return "", false
	}
	a = a.Unmap().WithZone("")
	for _, e := range n.entries {
		if e.prefix.Contains(a) {
			return e.plan, true
		}
	}
	return "", false
}

// Len is the number of networks.
func (n Networks) Len() int { return len(n.entries) }

// String renders the networks as RATE_LIMIT_NETWORKS writes them, most
// specific first.
func (n Networks) String() string {
	parts := make([]string, len(n.entries))
	for i, e := range n.entries {
		parts[i] = e.prefix.String() + "=" + e.plan
	}
	return strings.Join(parts, ",")
}
