package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// MaxListLimits bounds the limits of one tier, plan or route: each is one
// more key the decision's script reads and writes.
const MaxListLimits = 8

// OwnedLimit is one limit of a LimitList, as its owner brings it to a
// request (internal/policy's rules hold these).
type OwnedLimit struct {
	ratelimit.Limit
	// Owner is the tier, plan or route ("POST /auth/*") whose list it is,
	// or the quota (QuotaLimitName).
	Owner string
	// Shadow is true when the limit is evaluated and reported but not
	// enforced (RATE_LIMIT_SHADOW): set by policy, which reads the
	// stage's Shadow.
	Shadow bool
	// OwnAlgorithm is true when the limit named its algorithm
	// ("20/1s:token-bucket"): RATE_LIMIT_ALGORITHM and a stage's
	// rateLimitAlgorithm do not replace it.
	OwnAlgorithm bool
}

// LimitList is every limit of one tier, plan or route, written
// "20/1s,600/1m,100000/1d" (each item "N/window[:algorithm]"). A request
// passes only if every limit of the list admits it, and then spends on all
// of them; a denied request spends on none.
//
// A list of one limit is named after its owner ("anonymous", "pro",
// "POST /auth/*"), as a single limit always was; the limits of a longer
// list are named owner-window ("pro-1s", "pro-1m", "pro-1d"), so two
// limits of one list may not share a window. The name is the policy name
// of the RateLimit headers and part of the Redis key.
type LimitList []OwnedLimit

// Limits returns the list's limits, in order, as a new slice.
func (l LimitList) Limits() []ratelimit.Limit {
	out := make([]ratelimit.Limit, len(l))
	for i, x := range l {
		out[i] = x.Limit
	}
	return out
}

// String renders the list's rates, e.g. "20/1s,600/1m".
func (l LimitList) String() string {
	parts := make([]string, len(l))
	for i, x := range l {
		parts[i] = strconv.FormatInt(x.Count, 10) + "/" + windowText(x.Limit)
	}
	return strings.Join(parts, ",")
}

// withAlgorithm returns the list with alg as the algorithm of every limit
// that did not name its own; l itself is not changed.
func (l LimitList) withAlgorithm(alg ratelimit.Algorithm) LimitList {
	out := make(LimitList, len(l))
	for i, x := range l {
		if !x.OwnAlgorithm {
			x.Algorithm = alg
		}
		out[i] = x
	}
	return out
}

// windowText is the window of l as the configuration writes it: "1m",
// "10s", and whole days in days ("1d").
func windowText(l ratelimit.Limit) string {
	if day := 24 * time.Hour; l.Window%day == 0 {
		return strconv.FormatInt(int64(l.Window/day), 10) + "d"
	}
	_, w, _ := strings.Cut(l.String(), "/")
	return w
}

// ParseLimitList parses a list of limits owned by owner (a tier, a plan or
// a route): comma-separated "N/window[:algorithm]" items. An item without
// its own algorithm gets alg. Empty items are an error, and so are more
// than MaxListLimits items and two items with the same window.
func ParseLimitList(owner, spec string, alg ratelimit.Algorithm) (LimitList, error) {
	items := strings.Split(spec, ",")
	if len(items) > MaxListLimits {
		return nil, fmt.Errorf("%d limits; at most %d", len(items), MaxListLimits)
	}
	list := make(LimitList, 0, len(items))
	seen := make(map[string]bool, len(items))
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, errors.New("an empty limit in the list")
		}
		l, own, err := makeLimitSpec(owner, item, alg)
		if err != nil {
			return nil, err
		}
		w := windowText(l)
		if seen[w] {
			return nil, fmt.Errorf("two limits per %s (each limit of a list needs its own window)", w)
		}
		seen[w] = true
		list = append(list, OwnedLimit{Limit: l, Owner: owner, OwnAlgorithm: own})
	}
	if len(list) > 1 {
		for i := range list {
			list[i].Name = owner + "-" + windowText(list[i].Limit)
			if err := list[i].Validate(); err != nil {
				return nil, err
			}
		}
	}
	return list, nil
}

// parseTierList parses a tier's limit list, falling back to def.
func parseTierList(name, tier, v, def string, alg ratelimit.Algorithm) (LimitList, error) {
	return orDefault(name, v, def, def, func(s string) (LimitList, error) { return ParseLimitList(tier, s, alg) })
}

// orDefault parses variable's value v with parse, or def when v is empty.
// A value that does not parse is reported (the error ends "using " and
// using, def as the message shows it) and def used; def, a constant,
// always parses.
func orDefault[T any](variable, v, def, using string, parse func(string) (T, error)) (T, error) {
	d, err := parse(def)
	if err != nil {
		panic(fmt.Sprintf("config: default %s=%q: %v", variable, def, err))
	}
	return orValue(variable, v, d, using, parse)
}

// orValue parses variable's value v with parse, or returns def when v is
// empty or does not parse (then with the error, naming using: def as the
// message shows it).
func orValue[T any](variable, v string, def T, using any, parse func(string) (T, error)) (T, error) {
	if v == "" {
		return def, nil
	}
	x, err := parse(v)
	if err != nil {
		return def, badValue(variable, v, err, using)
	}
	return x, nil
}

// durationIn parses a Go duration from min to max; any other value is
// refused with "want " and want.
func durationIn(min, max time.Duration, want string) func(string) (time.Duration, error) {
	return func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d < min || d > max {
			return 0, errors.New("want " + want)
		}
		return d, nil
	}
}

// badValue is the error of variable's value v, refused for err, naming
// what is used instead.
func badValue(variable, v string, err error, using any) error {
	return fmt.Errorf("%s=%q: %w; using %v", variable, truncate.Text(v, truncate.QuotedLen), err, using)
}

// stageList resolves one tier or plan on a stage: the stage variable's
// value v when set and valid, else the environment's list env in the
// stage's algorithm alg (for the limits that name none).
func stageList(variable, owner, v string, env LimitList, alg ratelimit.Algorithm) (LimitList, error) {
	env = env.withAlgorithm(alg)
	using := env.String()
	if len(env) == 0 {
		using = "the caller's tier limits"
	}
	return orValue("stage variable "+variable, v, env, using, func(s string) (LimitList, error) { return ParseLimitList(owner, s, alg) })
}
