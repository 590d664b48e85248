package network

import (
	"net/netip"
	"slices"
	"time"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Verdict is what a source address's networks say, read in every form
// (identity.SourceForms: a 6to4 address is also the IPv4 address it is
// derived from) against both sources of network rules, RATE_LIMIT_NETWORKS
// (each form's most specific network) and the live network controls in
// force (controls.Network, as a NetworkControlCache reads them), under
// the strictest reading (Read):
//
//   - blocked when any form is blocked by either source: by its most
//     specific static network, or by any live block whose network holds it
//     (a live block is not lifted by a narrower live exemption);
//   - unlimited when every form is under a static unlimited network, or
//     every form under a live exemption, and no form is blocked by either
//     source: an exemption holds only for an address under it in every
//     form, lifts the limits (not authentication), and never lifts a
//     block;
//   - otherwise the plan every form's network names, if they agree. When
//     they disagree about a network's plan, the caller is held by every
//     reading together (policy.Stage.CallerRules: the plans the forms name and
//     its tier): a stricter plan cannot be escaped through another form,
//     a looser one is not gained.
type Verdict struct {
	// Verdict is what the network decides alone: nothing
	// (httplimit.NetworkLimits), or a block or an exemption that is the
	// whole answer.
	Verdict httplimit.NetworkVerdict
	// Plan is the plan every form's network names for a caller without
	// one of its own, "" when none does or when the forms disagree.
	Plan string
	// Plans are, when the forms disagree about a network's plan (Plan
	// ""), the plans any form's network names, in the forms' order, each
	// once: a caller with no plan of its own is held by each and its tier
	// together.
	Plans []string
	// Control is the live control that made the verdict when the static
	// one alone would have been another: a block (Until: the latest end
	// of the blocks that hold a form) or an exemption (Until: the earliest
	// end among the exemptions that hold the forms, when the first of them
	// lapses). It is the zero controls.Applied when the static verdict
	// stands, a block of both sources included (RATE_LIMIT_NETWORKS's
	// block is the answer: it does not end).
	Control controls.Applied
}

// String is the network's verdict as RATE_LIMIT_NETWORKS writes it, for
// people: Blocked, Unlimited, the plan the
// network names, or "".
func (n Verdict) String() string {
	switch n.Verdict {
	case httplimit.NetworkBlocked:
		return Blocked
	case httplimit.NetworkUnlimited:
		return Unlimited
	}
	return n.Plan
}

// Decided is what a caller's network decides alone, without a Redis
// call, for httplimit.KindOf: a blocked network refuses the request
// whatever it presented; an unlimited one admits it with no limit (a
// credential that does not verify is still unauthorized). The Result's
// Control is the live network control that made the verdict, if one did.
// ok is false when the network decides nothing.
func (n Verdict) Decided(unauthorized bool) (d httplimit.Decided, ok bool) {
	if n.Verdict == httplimit.NetworkLimits {
		return httplimit.Decided{}, false
	}
	res := ratelimit.Result{Allowed: n.Verdict == httplimit.NetworkUnlimited, Control: n.Control}
	return httplimit.Decided{Network: n.Verdict, Unauthorized: unauthorized, Result: res}, true
}

// Read is what networks and the live network controls live say of
// the source address sourceIP (see Verdict); nothing when it does not
// parse.
func Read(networks Networks, live []controls.Network, sourceIP string) Verdict {
	if networks.Len() == 0 && len(live) == 0 {
		return Verdict{}
	}
	forms, ok := identity.SourceForms(sourceIP)
	if !ok {
		return Verdict{}
	}
	static := staticVerdict(networks, forms)
	if static.Verdict == httplimit.NetworkBlocked {
		return static
	}
	var blockEnd, exemptEnd time.Time
	exempt := true
	for _, a := range forms {
		formExempt := time.Time{}
		for _, nc := range live {
			if !nc.Prefix.Contains(a) {
				continue
			}
			switch nc.Control.Kind {
			case controls.Block:
				if nc.Control.Until.After(blockEnd) {
					blockEnd = nc.Control.Until
				}
			case controls.Exempt:
				if nc.Control.Until.After(formExempt) {
					formExempt = nc.Control.Until
				}
			}
		}
		if formExempt.IsZero() {
			exempt = false
		} else if exemptEnd.IsZero() || formExempt.Before(exemptEnd) {
			exemptEnd = formExempt
		}
	}
	switch {
	case !blockEnd.IsZero():
		return Verdict{Verdict: httplimit.NetworkBlocked, Control: controls.Applied{Kind: controls.Block, Until: blockEnd}}
	case exempt && static.Verdict != httplimit.NetworkUnlimited:
		return Verdict{Verdict: httplimit.NetworkUnlimited, Control: controls.Applied{Kind: controls.Exempt, Until: exemptEnd}}
	}
	return static
}

// staticVerdict is what RATE_LIMIT_NETWORKS alone says of parsed forms,
// with, when the forms disagree, the plans any form's most specific
// network names (an unlimited form exempts nothing unless every form is
// unlimited).
func staticVerdict(networks Networks, forms []netip.Addr) Verdict {
	if networks.Len() == 0 {
		return Verdict{}
	}
	var plans []string
	blocked, shared := false, true
	first, _ := networks.LookupAddr(forms[0])
	for _, a := range forms {
		plan, _ := networks.LookupAddr(a)
		blocked = blocked || plan == Blocked
		shared = shared && plan == first
		if plan != "" && plan != Unlimited && !slices.Contains(plans, plan) {
			plans = append(plans, plan)
		}
	}
	switch {
	case blocked:
		return Verdict{Verdict: httplimit.NetworkBlocked}
	case !shared:
		return Verdict{Plans: plans}
	case first == Unlimited:
		return Verdict{Verdict: httplimit.NetworkUnlimited}
	}
	return Verdict{Plan: first}
}
