package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/internal/truncate"
)

// StageVarConcurrency is the stage variable that replaces
// RATE_LIMIT_CONCURRENCY on a stage.
const StageVarConcurrency = "rateLimitConcurrency"

// Bounds of the concurrency configuration.
const (
	// MaxConcurrencyEntries bounds RATE_LIMIT_CONCURRENCY: each entry
	// matching a request is one more Redis call before it runs.
	MaxConcurrencyEntries = 64
	// MaxConcurrency is the largest in-flight limit of one entry.
	MaxConcurrency = 100_000
	// MinConcurrencyLease and MaxConcurrencyLease bound
	// RATE_LIMIT_CONCURRENCY_LEASE.
	MinConcurrencyLease = time.Second
	MaxConcurrencyLease = time.Hour
)

// Concurrency are the in-flight limits of the API function
// (RATE_LIMIT_CONCURRENCY, rateLimitConcurrency): how many of one
// caller's requests may run at once. The zero value limits nothing.
type Concurrency struct {
	// Owners maps a tier or a plan name to the in-flight limit of each
	// caller of that tier or plan.
	Owners map[string]int64
	// Routes are the in-flight limits of the requests of one method and
	// path glob, per caller, beside its tier's or plan's.
	Routes []ConcurrencyRoute
}

// ConcurrencyRoute is an in-flight limit on the requests of one route,
// named after it (Route.Name: its policy name and part of its Redis key).
type ConcurrencyRoute struct {
	route.Route
	// Max is how many of a caller's requests of the route may run at once.
	Max int64
}

// Empty reports whether nothing is limited.
func (c Concurrency) Empty() bool { return len(c.Owners) == 0 && len(c.Routes) == 0 }

// ParseConcurrency parses RATE_LIMIT_CONCURRENCY: comma-separated entries
// "owner=N", owner a tier, a plan or a route ("METHOD /path-glob", or
// "METHOD:/path-glob" in a stage variable), N from 1 to MaxConcurrency,
// such as "anonymous=2,org=50,pro=20,POST /v1/export=1"; the empty string
// and "none" limit nothing. Any bad entry rejects the whole value, an
// owner or a route given twice ("GET /x" and "get:/x" are one) among them,
// its error wrapping ErrDuplicateEntry.
func ParseConcurrency(s string) (Concurrency, error) {
	items := listItems(s)
	if len(items) == 0 {
		return Concurrency{}, nil
	}
	c := Concurrency{Owners: make(map[string]int64)}
	for i, entry := range items {
		if i >= MaxConcurrencyEntries {
			return Concurrency{}, fmt.Errorf("more than %d entries", MaxConcurrencyEntries)
		}
		if err := c.add(entry); err != nil {
			return Concurrency{}, fmt.Errorf("entry %q: %w", truncate.Text(entry, truncate.QuotedLen), err)
		}
	}
	return c, nil
}

// add adds one "owner=N" entry of RATE_LIMIT_CONCURRENCY.
func (c *Concurrency) add(entry string) error {
	owner, value, ok := strings.Cut(entry, "=")
	if !ok {
		return errors.New("want owner=N (a tier, a plan or METHOD /path-glob)")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || n < 1 || n > MaxConcurrency {
		return fmt.Errorf("want a whole number of requests from 1 to %d", MaxConcurrency)
	}
	if owner = strings.TrimSpace(owner); !isRouteName(owner) {
		name, err := concurrencyOwner(owner)
		if err != nil {
			return err
		}
		if _, dup := c.Owners[name]; dup {
			return fmt.Errorf("%w: %s is given twice", ErrDuplicateEntry, name)
		}
		c.Owners[name] = n
		return nil
	}
	rt, err := route.Parse(owner)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(c.Routes, func(o ConcurrencyRoute) bool { return o.Name() == rt.Name() }) {
		// One name is one Redis key: two entries would take two slots of
		// it per request, halving either limit.
		return fmt.Errorf("%w: %s is given twice", ErrDuplicateEntry, rt.Name())
	}
	c.Routes = append(c.Routes, ConcurrencyRoute{Route: rt, Max: n})
	return nil
}

// concurrencyOwner normalizes a tier or plan name.
func concurrencyOwner(raw string) (string, error) {
	switch raw {
	case identity.TierAnonymous, identity.TierUser, identity.TierOrg:
		return raw, nil
	}
	name, err := planName(raw)
	if err != nil {
		return "", fmt.Errorf("%w (want a tier, a plan or METHOD /path-glob)", err)
	}
	return name, nil
}

// parseConcurrencyVar parses RATE_LIMIT_CONCURRENCY, reporting a bad value
// (nothing is then limited in flight, as without the variable: there is
// no safer default to fall back to, so the error says so loudly).
func parseConcurrencyVar(v string) (Concurrency, error) {
	c, err := ParseConcurrency(v)
	if err != nil {
		return Concurrency{}, fmt.Errorf("RATE_LIMIT_CONCURRENCY=%q: %w; NO in-flight limit applies until it is fixed", truncate.Text(v, truncate.QuotedLen), err)
	}
	return c, nil
}

// parseConcurrencyLease parses RATE_LIMIT_CONCURRENCY_LEASE: a Go duration
// from MinConcurrencyLease to MaxConcurrencyLease, or empty (0: the lease
// is the invocation's deadline plus a margin).
func parseConcurrencyLease(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinConcurrencyLease || d > MaxConcurrencyLease || d%time.Millisecond != 0 {
		return 0, fmt.Errorf("RATE_LIMIT_CONCURRENCY_LEASE=%q: want whole milliseconds from %s to %s, like 30s; using the invocation's deadline plus a margin", truncate.Text(v, truncate.QuotedLen), MinConcurrencyLease, MaxConcurrencyLease)
	}
	return d, nil
}

// stageConcurrency resolves the in-flight limits on a stage: the stage
// variable's when set and valid, else the environment's.
func stageConcurrency(v string, env Concurrency) (Concurrency, error) {
	return orValue("stage variable "+StageVarConcurrency, v, env, "RATE_LIMIT_CONCURRENCY", ParseConcurrency)
}
