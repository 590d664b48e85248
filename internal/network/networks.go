// Package network holds the source-network rules: the networks
// RATE_LIMIT_NETWORKS configures (Networks) and what they and the live
// network controls say of a source address (Verdict, Read), under the
// strictest reading of its forms.
package network

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/truncate"
)

// The plans of RATE_LIMIT_NETWORKS that are not limits.
const (
	// Unlimited exempts a network: its requests are admitted
	// without a Redis call (a company's own monitors, say).
	Unlimited = "unlimited"
	// Blocked refuses a network's requests without a Redis call.
	Blocked = "blocked"
)

// maxNetworks bounds RATE_LIMIT_NETWORKS.
const maxNetworks = 1024

// Networks maps source networks to a plan (RATE_LIMIT_NETWORKS). The zero
// value maps nothing.
type Networks struct {
	// entries are sorted longest prefix first, so the first match is the
	// most specific.
	entries []Entry
}

// Entry is one entry of RATE_LIMIT_NETWORKS.
type Entry struct {
	// Prefix is the network, IPv4 for an IPv4-mapped CIDR.
	Prefix netip.Prefix
	// Plan is Unlimited, Blocked or a plan name.
	Plan string
}

// Entries returns the networks, most specific first.
func (n Networks) Entries() []Entry { return slices.Clone(n.entries) }

// Parse parses the entries of RATE_LIMIT_NETWORKS (the value split at
// its commas, each item trimmed and none empty): each
// "CIDR=plan", IPv4 or IPv6 ("10.0.0.0/8=unlimited,192.0.2.0/24=blocked,
// 2001:db8::/32=partner"); a bare address is a network of one. The plan is
// Unlimited, Blocked or a plan name. A CIDR with host bits
// set (10.1.2.3/8, or 10.0.0.0/0 meant as /8) is refused: masking it would
// read a typo as a far wider network. When networks overlap, the longest
// prefix wins. No entries map nothing. Any bad entry
// fails the whole value, naming the entry.
func Parse(items []string) (Networks, error) {
	var n Networks
	seen := make(map[netip.Prefix]bool)
	for _, entry := range items {
		cidr, rawPlan, ok := strings.Cut(entry, "=")
		if !ok {
			return Networks{}, fmt.Errorf("network %q: want CIDR=plan, like 10.0.0.0/8=unlimited", truncate.Text(entry, truncate.QuotedLen))
		}
		prefix, err := parseNetwork(strings.TrimSpace(cidr))
		if err != nil {
			return Networks{}, fmt.Errorf("network %q: %w", truncate.Text(entry, truncate.QuotedLen), err)
		}
		plan, ok := identity.NormalizePlan(rawPlan)
		if !ok {
			return Networks{}, fmt.Errorf("network %q: plan %q: want %s, %s or a plan name (letters, digits, underscores)",
				truncate.Text(entry, truncate.QuotedLen), truncate.Text(strings.TrimSpace(rawPlan), truncate.QuotedLen), Unlimited, Blocked)
		}
		if seen[prefix] {
			return Networks{}, fmt.Errorf("network %q: %s is given twice", truncate.Text(entry, truncate.QuotedLen), prefix)
		}
		seen[prefix] = true
		n.entries = append(n.entries, Entry{Prefix: prefix, Plan: plan})
	}
	if len(n.entries) > maxNetworks {
		return Networks{}, fmt.Errorf("more than %d networks", maxNetworks)
	}
	sort.SliceStable(n.entries, func(i, j int) bool { return n.entries[i].Prefix.Bits() > n.entries[j].Prefix.Bits() })
	return n, nil
}

// parseNetwork parses a CIDR or a bare address, IPv4-mapped IPv6 forms
// read as IPv4.
func parseNetwork(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR nor an IP address", truncate.Text(s, truncate.QuotedLen))
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR: %w", truncate.Text(s, truncate.QuotedLen), err)
	}
	if a := p.Addr(); a.Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			return netip.Prefix{}, fmt.Errorf("%q: an IPv4-mapped prefix shorter than /96", truncate.Text(s, truncate.QuotedLen))
		}
		p = netip.PrefixFrom(a.Unmap(), bits)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set: it would be %s; write the network's first address (or the prefix length meant)", truncate.Text(s, truncate.QuotedLen), m)
	}
	return p, nil
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
	return n.LookupAddr(a.Unmap().WithZone(""))
}

// LookupAddr returns the plan of the most specific network holding a, as
// it is (an IPv4-mapped a matches no IPv4 network: Unmap it first), and
// false when none does.
func (n Networks) LookupAddr(a netip.Addr) (plan string, ok bool) {
	for _, e := range n.entries {
		if e.Prefix.Contains(a) {
			return e.Plan, true
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
		parts[i] = e.Prefix.String() + "=" + e.Plan
	}
	return strings.Join(parts, ",")
}
