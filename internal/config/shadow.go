package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/internal/truncate"
)

// StageVarShadow is the stage variable of RATE_LIMIT_SHADOW. API Gateway
// allows no spaces or '*' in stage variable values: a route is written
// there with a colon, "POST:/v1/reports", and a route whose glob holds
// '*' cannot be named on a stage.
const StageVarShadow = "rateLimitShadow"

// maxShadowNames bounds RATE_LIMIT_SHADOW.
const maxShadowNames = 128

// Shadow is the set of limits evaluated and reported but not enforced
// (RATE_LIMIT_SHADOW, rateLimitShadow): a request only such limits deny is
// admitted, logged and counted with outcome shadow-denied. Names are
// tiers ("user"), plans ("pro"), routes as RATE_LIMIT_ROUTES writes them
// ("POST /v1/reports", every limit of the route) and single limits of a
// list by their policy name ("pro-1d"). The zero value shadows nothing.
type Shadow struct {
	names map[string]struct{}
}

// ParseShadow parses a comma-separated list of names. The empty string
// and "none" shadow nothing. Tier, plan and limit names are
// case-insensitive; a route is "METHOD /glob" (ANY for every method), or
// "METHOD:/glob" where spaces are not allowed, normalized as
// RATE_LIMIT_ROUTES normalizes it.
func ParseShadow(s string) (Shadow, error) {
	names := make(map[string]struct{})
	for _, item := range listItems(s) {
		name, err := shadowName(item)
		if err != nil {
			return Shadow{}, err
		}
		names[name] = struct{}{}
	}
	if len(names) > maxShadowNames {
		return Shadow{}, fmt.Errorf("more than %d names", maxShadowNames)
	}
	return Shadow{names: names}, nil
}

// shadowName normalizes one name of a shadow list.
func shadowName(item string) (string, error) {
	if isRouteName(item) {
		rt, err := route.Parse(item)
		if err != nil {
			return "", fmt.Errorf("route %q: %w", truncate.Text(item, truncate.QuotedLen), err)
		}
		return rt.Name(), nil
	}
	// A single limit of a list: owner-window, e.g. pro-1d.
	owner, window, isLimit := strings.Cut(item, "-")
	if name, ok := identity.NormalizePlan(owner); ok && (!isLimit || validWindowText(window)) {
		if isLimit {
			return name + "-" + window, nil
		}
		return name, nil
	}
	return "", fmt.Errorf("%q: want a tier, a plan, a limit of a list (plan-1d) or a route (POST /v1/reports)", truncate.Text(item, truncate.QuotedLen))
}

// isRouteName reports whether an owner as a list names it is a route,
// "METHOD /glob" or "METHOD:/glob", rather than a tier or a plan.
func isRouteName(owner string) bool {
	return strings.Contains(owner, " ") || strings.Contains(owner, ":/")
}

// validWindowText accepts what a limit name's window part can be ("1s",
// "10m", "1d", "500ms").
func validWindowText(w string) bool {
	return w != "" && w[0] >= '1' && w[0] <= '9' && len(w) <= 16 &&
		!strings.ContainsFunc(w, func(c rune) bool { return (c < '0' || c > '9') && (c < 'a' || c > 'z') })
}

// Has reports whether a limit is shadowed, by its owner's name (a tier, a
// plan or a route's "METHOD /glob") or its own policy name.
func (s Shadow) Has(owner, limitName string) bool {
	if len(s.names) == 0 {
		return false
	}
	_, o := s.names[owner]
	_, l := s.names[limitName]
	return o || l
}

// Names returns the shadowed names, sorted.
func (s Shadow) Names() []string { return slices.Sorted(maps.Keys(s.names)) }

// checkShadowNames refuses names that shadow nothing: a misspelt name would
// otherwise leave a limit enforced that the operator meant to try first
// (the safe side, but a silent one).
func checkShadowNames(s Shadow, tiers Tiers, plans Plans, routes []RouteLimit) error {
	known := map[string]bool{identity.TierAnonymous: true, identity.TierUser: true, identity.TierOrg: true}
	for _, list := range ownerLists(tiers, plans, routes) {
		for _, l := range list {
			known[l.Owner], known[strings.ToLower(l.Name)] = true, true
		}
	}
	var errs []error
	for _, n := range s.Names() {
		if !known[n] && !known[strings.ToLower(n)] {
			errs = append(errs, fmt.Errorf("%q names no tier, plan, route or limit", n))
		}
	}
	return errors.Join(errs...)
}
