package policy

import (
	"net/netip"
	"slices"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// NetworkOf is the RATE_LIMIT_NETWORKS verdict on a source address, read
// in every form (identity.SourceForms: a 6to4 address is also the IPv4
// address it is derived from), each form's verdict its most specific
// network's:
//
//   - config.NetworkBlocked when any form is blocked;
//   - otherwise the verdict every form shares (config.NetworkUnlimited or
//     a plan name): an exemption holds only for an address under it in
//     every form;
//   - "" when the forms disagree, none is under a network, or the address
//     does not parse. When they disagree about a network's plan, the
//     caller is held by every reading together (Stage.Caller: the plans
//     the forms name and its tier): a stricter plan cannot be escaped
//     through another form, a looser one is not gained.
//
// It is NetworkVerdict without live network controls.
func NetworkOf(networks config.Networks, sourceIP string) string {
	verdict, _ := NetworkVerdict(networks, nil, sourceIP)
	return verdict
}

// NetworkVerdict is a source address's network verdict under both sources
// of network rules: RATE_LIMIT_NETWORKS (static, read as NetworkOf reads
// it) and the live network controls in force (controls.Network, as
// a NetworkControlCache reads them), under the strictest reading of the
// two, every form of the address (identity.SourceForms) read against both:
//
//   - config.NetworkBlocked when any form is blocked by either source: by
//     its most specific static network, or by any live block whose network
//     holds it (a live block is not lifted by a narrower live exemption);
//   - config.NetworkUnlimited when every form is under a live exemption
//     and no form is blocked by either source: a live exemption lifts the
//     limits as an unlimited network does (not authentication), and never
//     lifts a block, static or live;
//   - otherwise NetworkOf's static verdict ("" when the forms disagree;
//     Stage.Caller then holds a caller by every reading together).
//
// control is the live control that made the verdict when the static one
// alone would have been another: a block (Until: the latest end of the
// blocks that hold a form) or an exemption (Until: the earliest end among
// the exemptions that hold the forms, when the first of them lapses). It
// is the zero controls.Applied when the static verdict stands, a block of
// both sources included (RATE_LIMIT_NETWORKS's block is the answer: it
// does not end).
func NetworkVerdict(networks config.Networks, live []controls.Network, sourceIP string) (verdict string, control controls.Applied) {
	r := readNetwork(networks, live, sourceIP)
	return r.verdict, r.control
}

// networkReading is a source address's network verdict (NetworkVerdict)
// with the plans its forms disagree on.
type networkReading struct {
	verdict string
	control controls.Applied
	// plans are, when the forms disagree about a network's plan (verdict
	// ""), the plans any form's network names, in the forms' order, each
	// once: a caller with no plan of its own is held by each and its tier
	// together (Stage.Caller).
	plans []string
}

// readNetwork is NetworkVerdict with the plans the forms disagree on.
func readNetwork(networks config.Networks, live []controls.Network, sourceIP string) networkReading {
	if networks.Len() == 0 && len(live) == 0 {
		return networkReading{}
	}
	forms, ok := identity.SourceForms(sourceIP)
	if !ok {
		return networkReading{}
	}
	static, plans := staticVerdict(networks, forms)
	if static == config.NetworkBlocked {
		return networkReading{verdict: static}
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
		return networkReading{verdict: config.NetworkBlocked, control: controls.Applied{Kind: controls.Block, Until: blockEnd}}
	case exempt && static != config.NetworkUnlimited:
		return networkReading{verdict: config.NetworkUnlimited, control: controls.Applied{Kind: controls.Exempt, Until: exemptEnd}}
	}
	return networkReading{verdict: static, plans: plans}
}

// staticVerdict is NetworkOf on parsed forms, with, when the forms
// disagree, the plans any form's most specific network names (an
// unlimited form exempts nothing unless every form is unlimited).
func staticVerdict(networks config.Networks, forms []netip.Addr) (verdict string, plans []string) {
	if networks.Len() == 0 {
		return "", nil
	}
	blocked, shared := false, true
	first, _ := networks.LookupAddr(forms[0])
	for _, a := range forms {
		plan, _ := networks.LookupAddr(a)
		blocked = blocked || plan == config.NetworkBlocked
		shared = shared && plan == first
		if plan != "" && plan != config.NetworkUnlimited && !slices.Contains(plans, plan) {
			plans = append(plans, plan)
		}
	}
	switch {
	case blocked:
		return config.NetworkBlocked, nil
	case shared:
		return first, nil
	}
	return "", plans
}

// NetworkDecision is the answer a caller's network gives alone, without a
// Redis call: a blocked network refuses the request whatever it presented
// (Kind Blocked); an unlimited one admits it with no limit (Kind
// Unlimited; a credential that does not verify is still answered as
// unauthorized). The Result's Control is the live network control that
// made the verdict (Caller.NetworkControl), if one did. ok is false when
// the network decides nothing.
func (c Caller) NetworkDecision(unauthorized bool) (kind apigw.Kind, res ratelimit.Result, ok bool) {
	if c.Verdict == apigw.NetworkLimits {
		return 0, ratelimit.Result{}, false
	}
	res = ratelimit.Result{Allowed: c.Verdict == apigw.NetworkUnlimited, Control: c.NetworkControl}
	switch {
	case c.Verdict == apigw.NetworkBlocked:
		return apigw.Blocked, res, true
	case unauthorized:
		return apigw.Unauthorized, res, true
	}
	return apigw.Unlimited, res, true
}

// NetworkName is the network's verdict as RATE_LIMIT_NETWORKS writes it,
// for people: config.NetworkBlocked, config.NetworkUnlimited, the plan
// the network names, or "".
func (c Caller) NetworkName() string {
	switch c.Verdict {
	case apigw.NetworkBlocked:
		return config.NetworkBlocked
	case apigw.NetworkUnlimited:
		return config.NetworkUnlimited
	}
	return c.NetworkPlan
}
