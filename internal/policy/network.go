package policy

import (
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/edge"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit"
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
//     does not parse.
func NetworkOf(networks config.Networks, sourceIP string) string {
	if networks.Len() == 0 {
		return ""
	}
	forms, ok := identity.SourceForms(sourceIP)
	if !ok {
		return ""
	}
	blocked, shared := false, true
	first, _ := networks.LookupAddr(forms[0])
	for _, a := range forms {
		plan, _ := networks.LookupAddr(a)
		blocked = blocked || plan == config.NetworkBlocked
		shared = shared && plan == first
	}
	switch {
	case blocked:
		return config.NetworkBlocked
	case shared:
		return first
	}
	return ""
}

// NetworkDecision is the answer a caller's network gives alone, without a
// Redis call: a blocked network refuses the request whatever it presented
// (Kind Blocked); an unlimited one admits it with no limit (Kind
// Unlimited; a credential that does not verify is still answered as
// unauthorized). ok is false when the network decides nothing.
func (c Caller) NetworkDecision(unauthorized bool) (kind edge.Kind, res ratelimit.Result, ok bool) {
	switch c.Network {
	case config.NetworkBlocked:
		return edge.Blocked, ratelimit.Result{}, true
	case config.NetworkUnlimited:
		if unauthorized {
			return edge.Unauthorized, ratelimit.Result{Allowed: true}, true
		}
		return edge.Unlimited, ratelimit.Result{Allowed: true}, true
	}
	return 0, ratelimit.Result{}, false
}
