package policy

import (
	"fmt"
	"net/netip"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/route"
)

// Shortest networks an exemption (unlimited, or a plan) may name without a
// warning: a shorter one exempts a good part of the Internet.
const (
	MinExemptIPv4Bits = 8
	MinExemptIPv6Bits = 32
)

// Warnings are what a stage's configuration loosens without being wrong
// (slidegate check prints them, a function logs them at cold start):
//
//   - an unlimited or plan network shorter than /8 (IPv4) or /32 (IPv6);
//   - a tier every limit of which is shadowed: its callers without a plan
//     have no enforced limit of their own (a plan in shadow keeps its
//     callers' tier beneath it, so only a shadowed tier leaves a plan's
//     callers bare as well);
//   - RATE_LIMIT_COSTS entries of different costs that some request
//     matches both: the highest applies (see Stage.Resolve), whatever
//     their order.
func Warnings(s Stage) []string {
	var out []string
	for _, n := range s.Limits.Networks.Entries() {
		if n.Plan == network.Blocked {
			continue
		}
		min := MinExemptIPv6Bits
		if n.Prefix.Addr().Is4() {
			min = MinExemptIPv4Bits
		}
		if n.Prefix.Bits() < min {
			out = append(out, fmt.Sprintf("network %s=%s is shorter than /%d: %s addresses are %s (RATE_LIMIT_NETWORKS)",
				n.Prefix, n.Plan, min, addressCount(n.Prefix), exemptionText(n.Plan)))
		}
	}
	shadowedTiers := map[string]bool{}
	for _, tier := range []string{identity.TierAnonymous, identity.TierUser, identity.TierOrg} {
		c := s.CallerRules(identity.Caller{Tier: tier}, "")
		if allShadow(c.Own) {
			shadowedTiers[tier] = true
			out = append(out, fmt.Sprintf("tier %s is shadowed (RATE_LIMIT_SHADOW): its callers without a plan have no enforced limit of their own, only the route limits and the stage throttle", tier))
		}
	}
	for _, plan := range s.Limits.Plans.Names() {
		for _, tier := range []string{identity.TierAnonymous, identity.TierUser, identity.TierOrg} {
			if shadowedTiers[tier] && allShadow(s.CallerRules(identity.Caller{Tier: tier, Plan: plan}, "").Own) {
				out = append(out, fmt.Sprintf("plan %s and tier %s are both shadowed (RATE_LIMIT_SHADOW): the plan's %s callers have no enforced limit of their own, only the route limits and the stage throttle", plan, tier, tier))
			}
		}
	}
	costs := s.Limits.Costs
	for i, a := range costs {
		for _, b := range costs[i+1:] {
			if a.Cost != b.Cost && route.Overlap(a.Route, b.Route) {
				high := a
				if b.Cost > a.Cost {
					high = b
				}
				out = append(out, fmt.Sprintf("costs %s and %s overlap: a request matching both costs %d, the highest (RATE_LIMIT_COSTS; the order does not matter)", a, b, high.Cost))
			}
		}
	}
	return out
}

func exemptionText(plan string) string {
	if plan == network.Unlimited {
		return "unlimited"
	}
	return "on plan " + plan
}

// addressCount says how many addresses p holds, roughly.
func addressCount(p netip.Prefix) string {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 64 {
		return fmt.Sprintf("2^%d", host)
	}
	return fmt.Sprintf("%d", uint64(1)<<host)
}
