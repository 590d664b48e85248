// Package config reads a slidegate function's configuration: the
// environment, parsed once at cold start into typed values, and the REST API
// stage variables that override part of it per request.
//
// Nothing here ever fails a function. A value that does not parse is reported
// as an error naming the variable and the value (for the log), and the
// variable's default is used instead: bad configuration never crashes a
// function and never means "unlimited".
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// Defaults of the configuration table of docs/contract.md.
const (
	DefaultAnonymous         = "30/1m"
	DefaultUser              = "600/1m"
	DefaultOrg               = "10000/1m"
	DefaultRoutes            = "POST /auth/*=5/1m:sliding-log"
	DefaultFailClosed        = "/auth/*"
	DefaultFallbackInstances = 10
	DefaultKeyPrefix         = "rl"
	// DefaultRedisTimeout is REDIS_TIMEOUT's default: the whole Redis
	// budget of one decision.
	DefaultRedisTimeout   = 100 * time.Millisecond
	DefaultAPIKeysRefresh = 5 * time.Minute
	DefaultJWTLeeway      = identity.DefaultLeeway
	// MaxJWTLeeway is the largest JWT_LEEWAY.
	MaxJWTLeeway = identity.MaxLeeway
	// DefaultIPv6Prefix is the prefix length, in bits, an IPv6 anonymous
	// caller is counted per (RATE_LIMIT_IPV6_PREFIX).
	DefaultIPv6Prefix = identity.DefaultIPv6Prefix
	// DefaultQuota is RATE_LIMIT_QUOTA's default: ten quota calls a minute
	// per caller, plenty for a client checking its budget, little for a
	// flood.
	DefaultQuota          = "10/1m"
	DefaultHTTPAPIDenials = DenialsRefuse
)

// None, as the whole value of RATE_LIMIT_ROUTES or RATE_LIMIT_FAIL_CLOSED,
// turns the list off (an empty value means "the default").
const None = "none"

// Tiers are the per-caller limit lists, with the algorithm already
// applied.
type Tiers struct {
	// Anonymous are the limits per source IP of callers with no verified
	// identity (RATE_LIMIT_ANONYMOUS, rateLimitAnonymous).
	Anonymous LimitList
	// User are the limits per verified JWT subject (RATE_LIMIT_USER,
	// rateLimitUser).
	User LimitList
	// Org are the limits per known API key (RATE_LIMIT_ORG, rateLimitOrg).
	Org LimitList
	// Algorithm is the algorithm of every limit that does not name its own
	// (RATE_LIMIT_ALGORITHM, rateLimitAlgorithm). Limits of one request
	// that share an algorithm are decided by one script call.
	Algorithm ratelimit.Algorithm
}

// ForTier returns the limits of tier; an unknown tier gets the anonymous
// limits, the smallest promise.
func (t Tiers) ForTier(tier string) LimitList {
	switch tier {
	case identity.TierOrg:
		return t.Org
	case identity.TierUser:
		return t.User
	default:
		return t.Anonymous
	}
}

// JWT says how bearer tokens are verified. With neither JWKSURL nor an
// HS256 secret, bearer tokens are not verified and earn nothing.
type JWT struct {
	// Issuer is the iss a token must carry (JWT_ISSUER).
	Issuer string
	// Audience is an aud a token must carry (JWT_AUDIENCE).
	Audience string
	// JWKSURL is where RS256/ES256/EdDSA verification keys are fetched
	// (JWT_JWKS_URL). It is kept as given even when it is refused (not
	// https, and its host not a loopback address: see
	// identity.CheckJWKSURL), so that the verifier refuses the tokens it
	// would have verified rather than ignore them.
	JWKSURL string
	// HS256SecretARN names the Secrets Manager secret holding the HS256
	// key (its SecretString, used as raw bytes).
	HS256SecretARN string
	// HS256Secret is the HS256 key given directly in JWT_HS256_SECRET, for
	// local runs and tests only; HS256SecretARN is the production path.
	// It is kept as given even when it is shorter than
	// identity.MinHS256SecretLen, so that the verifier refuses HS256
	// tokens rather than ignore them.
	HS256Secret []byte
	// Leeway is the clock skew tolerated on exp, nbf and iat (JWT_LEEWAY):
	// from 0 to MaxJWTLeeway, DefaultJWTLeeway when unset or bad.
	Leeway time.Duration
}

// Enabled reports whether any verification key source is configured.
func (j JWT) Enabled() bool {
	return j.JWKSURL != "" || j.HS256SecretARN != "" || len(j.HS256Secret) > 0
}

// RedisIAM is ElastiCache IAM authentication of the Redis connections:
// every new connection authenticates as User with a short-lived token
// signed with the function's AWS credentials (see internal/iamauth). The
// zero value is off.
type RedisIAM struct {
	// User is the ElastiCache user id, which for an IAM-enabled user is
	// also its user name (REDIS_IAM_USER). Setting it turns IAM
	// authentication on.
	User string
	// CacheName is the replication group id of a node-based cache, or the
	// name of a serverless cache, lower-cased (REDIS_CACHE_NAME).
	CacheName string
	// Serverless marks a serverless cache (REDIS_CACHE_SERVERLESS).
	Serverless bool
}

// Enabled reports whether IAM authentication is on.
func (r RedisIAM) Enabled() bool { return r.User != "" }

// HashKey is the key identities are hashed with (HMAC-SHA-256) before they
// reach Redis, logs and principal ids. The zero value is no key: plain
// SHA-256, whose hashed IP addresses can be reversed by hashing the address
// space.
type HashKey struct {
	// SecretARN names the Secrets Manager secret whose SecretString is the
	// key (RATE_LIMIT_HASH_KEY_SECRET_ARN), the production path.
	SecretARN string
	// Key is the key given directly (RATE_LIMIT_HASH_KEY), for local runs
	// and tests; ignored when SecretARN is set.
	Key []byte
	// Refused is true when RATE_LIMIT_HASH_KEY was set but is too short:
	// a key was meant, so identities are never hashed without one, and
	// decisions behave as if Redis were unavailable.
	Refused bool
}

// Configured reports whether a key was meant (set, refused or in a
// secret): identities must then never be hashed without it.
func (h HashKey) Configured() bool {
	return h.SecretARN != "" || len(h.Key) > 0 || h.Refused
}

// Config is a function's whole configuration, parsed once per process.
type Config struct {
	// Redis is how to reach Redis (REDIS_URL, REDIS_CLUSTER, REDIS_TIMEOUT,
	// REDIS_TLS_CA_FILE).
	Redis redisclient.Config
	// RedisAuthSecretARN names the Secrets Manager secret holding the
	// Redis AUTH token. It is not read when RedisIAM is enabled.
	RedisAuthSecretARN string
	// RedisIAM is IAM authentication (REDIS_IAM_USER, REDIS_CACHE_NAME,
	// REDIS_CACHE_SERVERLESS); off unless REDIS_IAM_USER is set.
	RedisIAM RedisIAM
	// Limits are the environment's limits, networks and fail-closed
	// globs, before stage variables (a stage's are StageCache.For's).
	Limits
	// APIKeyPlans maps the hash of an API_KEY_HASHES entry written
	// "hash:plan" to its plan.
	APIKeyPlans map[string]string
	// JWTPlanClaim is the claim of a verified JWT that names the caller's
	// plan (JWT_PLAN_CLAIM); "" reads no plan from tokens.
	JWTPlanClaim string
	// FallbackInstances divides each limit for the local fallback.
	FallbackInstances int64
	// KeyPrefix starts every Redis key.
	KeyPrefix string
	// JWT is how bearer tokens are verified.
	JWT JWT
	// APIKeyHashes holds the known API keys as lower-case SHA-256 hex; nil
	// when API_KEY_HASHES is unset (the API Gateway keys are used then).
	APIKeyHashes map[string]struct{}
	// APIKeysRefresh is how often the API Gateway keys are re-listed.
	APIKeysRefresh time.Duration
	// HashKey is the identity hash key (RATE_LIMIT_HASH_KEY,
	// RATE_LIMIT_HASH_KEY_SECRET_ARN).
	HashKey HashKey
	// HTTPAPIDenials is how the HTTP API authorizer answers a request over
	// its limit and a fail-closed route Redis could not decide
	// (HTTP_API_DENIALS): DenialsRefuse unless set to DenialsForward.
	HTTPAPIDenials Denials
	// ConcurrencyLease is how long an in-flight slot is held when its
	// request never releases it (RATE_LIMIT_CONCURRENCY_LEASE); zero: the
	// invocation's deadline plus a margin.
	ConcurrencyLease time.Duration
}

// Denials is how an HTTP API authorizer answers what it cannot admit: a
// request over its limit, or a fail-closed route Redis could not decide.
type Denials string

// The values of HTTP_API_DENIALS.
const (
	// DenialsRefuse answers isAuthorized false: the HTTP API refuses the
	// request itself with 403, whatever the integration behind it. The
	// default, because it holds for any integration.
	DenialsRefuse Denials = "refuse"
	// DenialsForward answers isAuthorized true with the denial (retryAfter)
	// or the outage (unavailable) in the authorizer context, for an
	// integration that reads it and answers 429 or 503 itself, as the API
	// function does. Any other integration would serve the request.
	DenialsForward Denials = "forward"
)

// QuotaLimitName is the policy name of the GET /v1/quota limit
// (RATE_LIMIT_QUOTA), as it appears in the rate-limit headers.
const QuotaLimitName = "quota"

// FromEnv parses the configuration through getenv (os.Getenv in
// production). The returned Config is always usable; the error joins one
// error per bad value, each naming the variable, the value and the default
// used instead.
func FromEnv(getenv func(string) string) (*Config, error) {
	var errs []error
	report := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }

	redisCfg, err := RedisClientFromEnv(getenv)
	report(err)
	redisIAM, err := parseRedisIAM(get, redisCfg.URL)
	report(err)

	alg, err := parseAlgorithm("RATE_LIMIT_ALGORITHM", get("RATE_LIMIT_ALGORITHM"), ratelimit.SlidingWindow)
	report(err)
	tiers := Tiers{Algorithm: alg}
	tiers.Anonymous, err = parseTierList("RATE_LIMIT_ANONYMOUS", identity.TierAnonymous, get("RATE_LIMIT_ANONYMOUS"), DefaultAnonymous, alg)
	report(err)
	tiers.User, err = parseTierList("RATE_LIMIT_USER", identity.TierUser, get("RATE_LIMIT_USER"), DefaultUser, alg)
	report(err)
	tiers.Org, err = parseTierList("RATE_LIMIT_ORG", identity.TierOrg, get("RATE_LIMIT_ORG"), DefaultOrg, alg)
	report(err)
	plans, err := ParsePlans(get("RATE_LIMIT_PLANS"), alg)
	if err != nil {
		report(fmt.Errorf("RATE_LIMIT_PLANS: %w", err))
	}

	ipv6Prefix, err := parseIPv6Prefix("RATE_LIMIT_IPV6_PREFIX", get("RATE_LIMIT_IPV6_PREFIX"), DefaultIPv6Prefix)
	report(err)
	hashKey, err := parseHashKey(get("RATE_LIMIT_HASH_KEY_SECRET_ARN"), getenv("RATE_LIMIT_HASH_KEY"))
	report(err)

	quota, err := orDefault("RATE_LIMIT_QUOTA", get("RATE_LIMIT_QUOTA"), DefaultQuota, DefaultQuota,
		func(s string) (OwnedLimit, error) { return makeOwnedLimit(QuotaLimitName, s, alg) })
	report(err)
	denials, err := parseDenials(get("HTTP_API_DENIALS"))
	report(err)

	routes, err := parseRoutesVar(get("RATE_LIMIT_ROUTES"), alg)
	report(err)
	failClosed, err := parseFailClosedVar(get("RATE_LIMIT_FAIL_CLOSED"))
	report(err)
	costs, err := parseCostsVar(get("RATE_LIMIT_COSTS"), tiers, plans, routes)
	report(err)
	shadow, err := parseShadowVar("RATE_LIMIT_SHADOW", get("RATE_LIMIT_SHADOW"), tiers, plans, routes)
	report(err)
	networks, err := network.Parse(listItems(get("RATE_LIMIT_NETWORKS")))
	if err != nil {
		report(fmt.Errorf("RATE_LIMIT_NETWORKS=%q: %w; no network is exempt, blocked or given a plan", truncate.Text(get("RATE_LIMIT_NETWORKS"), truncate.QuotedLen), err))
	}
	planClaim, err := parsePlanClaim(get("JWT_PLAN_CLAIM"))
	report(err)
	concurrency, err := parseConcurrencyVar(get("RATE_LIMIT_CONCURRENCY"))
	report(err)
	lease, err := parseConcurrencyLease(get("RATE_LIMIT_CONCURRENCY_LEASE"))
	report(err)

	cfg := &Config{
		Redis:              redisCfg,
		RedisAuthSecretARN: get("REDIS_AUTH_SECRET_ARN"),
		RedisIAM:           redisIAM,
		Limits: Limits{Tiers: tiers, Plans: plans, Routes: routes, Costs: costs, Shadow: shadow, IPv6Prefix: ipv6Prefix,
			Quota: quota, Concurrency: concurrency, Networks: networks, FailClosed: failClosed},
		JWTPlanClaim:     planClaim,
		HashKey:          hashKey,
		HTTPAPIDenials:   denials,
		ConcurrencyLease: lease,
		JWT: JWT{
			Issuer:         get("JWT_ISSUER"),
			Audience:       get("JWT_AUDIENCE"),
			JWKSURL:        get("JWT_JWKS_URL"),
			HS256SecretARN: get("JWT_HS256_SECRET_ARN"),
		},
	}
	if s := getenv("JWT_HS256_SECRET"); s != "" {
		cfg.JWT.HS256Secret = []byte(s)
		if len(s) < identity.MinHS256SecretLen {
			// The length only: the value is a secret.
			report(fmt.Errorf("JWT_HS256_SECRET: %d bytes, want at least %d (a shorter HS256 key can be brute-forced from one token); HS256 tokens will not verify", len(s), identity.MinHS256SecretLen))
		}
	}
	if u := cfg.JWT.JWKSURL; u != "" {
		if err := identity.CheckJWKSURL(u); err != nil {
			report(fmt.Errorf("JWT_JWKS_URL=%q: %w; it is not fetched, and RS/PS/ES/EdDSA tokens will not verify", truncate.Text(u, truncate.QuotedLen), err))
		}
	}
	cfg.JWT.Leeway, err = orValue("JWT_LEEWAY", get("JWT_LEEWAY"), DefaultJWTLeeway, DefaultJWTLeeway, durationIn(0, MaxJWTLeeway, "a Go duration from 0s to "+MaxJWTLeeway.String()+", like 5s"))
	report(err)

	cfg.FallbackInstances, err = orValue("RATE_LIMIT_FALLBACK_INSTANCES", get("RATE_LIMIT_FALLBACK_INSTANCES"), DefaultFallbackInstances, DefaultFallbackInstances,
		func(s string) (int64, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 1 || n > 100_000 {
				return 0, errors.New("want a whole number from 1 to 100000")
			}
			return n, nil
		})
	report(err)
	cfg.KeyPrefix, err = orDefault("RATE_LIMIT_KEY_PREFIX", get("RATE_LIMIT_KEY_PREFIX"), DefaultKeyPrefix, strconv.Quote(DefaultKeyPrefix),
		func(s string) (string, error) { return s, validKeyPrefix(s) })
	report(err)
	cfg.APIKeysRefresh, err = orValue("API_KEYS_REFRESH", get("API_KEYS_REFRESH"), DefaultAPIKeysRefresh, DefaultAPIKeysRefresh, durationIn(time.Second, 24*time.Hour, "a Go duration between 1s and 24h, like 5m"))
	report(err)
	if v := get("API_KEY_HASHES"); v != "" {
		hashes, keyPlans, err := parseKeyHashes(v)
		report(err)
		cfg.APIKeyHashes, cfg.APIKeyPlans = hashes, keyPlans
	}
	if cfg.JWT.Enabled() && (cfg.JWT.Issuer == "" || cfg.JWT.Audience == "") {
		report(fmt.Errorf("JWT_ISSUER=%q, JWT_AUDIENCE=%q: both are required to verify bearer tokens; bearer tokens will not verify", truncate.Text(cfg.JWT.Issuer, truncate.QuotedLen), truncate.Text(cfg.JWT.Audience, truncate.QuotedLen)))
	}
	return cfg, errors.Join(errs...)
}

// parseIPv6Prefix parses an IPv6 prefix length: a whole number of bits
// from identity.MinIPv6Prefix to identity.MaxIPv6Prefix, falling back to
// def.
func parseIPv6Prefix(name, v string, def int) (int, error) {
	return orValue(name, v, def, def, func(s string) (int, error) {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "/"))
		if err != nil || n < identity.MinIPv6Prefix || n > identity.MaxIPv6Prefix {
			return 0, fmt.Errorf("want a prefix length in bits from %d to %d, like 64", identity.MinIPv6Prefix, identity.MaxIPv6Prefix)
		}
		return n, nil
	})
}

// parseHashKey reads RATE_LIMIT_HASH_KEY_SECRET_ARN and RATE_LIMIT_HASH_KEY.
// The error never quotes the key.
func parseHashKey(arn, key string) (HashKey, error) {
	switch {
	case arn != "" && key != "":
		return HashKey{SecretARN: arn}, errors.New("RATE_LIMIT_HASH_KEY and RATE_LIMIT_HASH_KEY_SECRET_ARN are both set: using the secret, and RATE_LIMIT_HASH_KEY is ignored")
	case arn != "":
		return HashKey{SecretARN: arn}, nil
	case key == "":
		return HashKey{}, nil
	case len(key) < identity.MinHashKeyLen:
		return HashKey{Refused: true}, fmt.Errorf("RATE_LIMIT_HASH_KEY: %d bytes; want at least %d (e.g. the output of openssl rand -hex 32); identities are not hashed without it, so every decision behaves as if Redis were unavailable",
			len(key), identity.MinHashKeyLen)
	}
	return HashKey{Key: []byte(key)}, nil
}

// parseRedisIAM reads REDIS_IAM_USER, REDIS_CACHE_NAME and
// REDIS_CACHE_SERVERLESS. IAM authentication stays off, with an error, when
// the user id or the cache name is missing or malformed: a token for the
// wrong cache would be refused anyway, and Redis then answers NOAUTH, which
// the failure policy handles. A rediss:// URL is expected (ElastiCache
// accepts IAM authentication over TLS only), but a plain one is only
// reported, so that a local Redis with an ACL user still works.
func parseRedisIAM(get func(string) string, redisURL string) (RedisIAM, error) {
	var errs []error
	var iam RedisIAM
	user, cache, serverless := get("REDIS_IAM_USER"), get("REDIS_CACHE_NAME"), get("REDIS_CACHE_SERVERLESS")
	if serverless != "" {
		b, err := strconv.ParseBool(serverless)
		if err != nil {
			errs = append(errs, fmt.Errorf("REDIS_CACHE_SERVERLESS=%q: want true or false; using false", truncate.Text(serverless, truncate.QuotedLen)))
		}
		iam.Serverless = b
	}
	if user == "" {
		if cache != "" {
			errs = append(errs, fmt.Errorf("REDIS_CACHE_NAME=%q: REDIS_IAM_USER is not set, so IAM authentication is off and the cache name is not used", truncate.Text(cache, truncate.QuotedLen)))
		}
		return RedisIAM{}, errors.Join(errs...)
	}
	valid := len(errs)
	if err := validIAMUser(user); err != nil {
		errs = append(errs, fmt.Errorf("REDIS_IAM_USER=%q: %w; IAM authentication is off", truncate.Text(user, truncate.QuotedLen), err))
	}
	lowerCache := strings.ToLower(cache)
	if cache == "" {
		errs = append(errs, errors.New(`REDIS_CACHE_NAME="": required with REDIS_IAM_USER (the replication group id or serverless cache name); IAM authentication is off`))
	} else if err := validCacheName(lowerCache); err != nil {
		errs = append(errs, fmt.Errorf("REDIS_CACHE_NAME=%q: %w; IAM authentication is off", truncate.Text(cache, truncate.QuotedLen), err))
	}
	if len(errs) > valid {
		return RedisIAM{}, errors.Join(errs...)
	}
	if redisURL != "" && !strings.HasPrefix(strings.ToLower(redisURL), "rediss://") {
		errs = append(errs, fmt.Errorf("REDIS_IAM_USER=%q: REDIS_URL is not a rediss:// (TLS) URL, and ElastiCache accepts IAM authentication over TLS only", truncate.Text(user, truncate.QuotedLen)))
	}
	iam.User, iam.CacheName = user, lowerCache
	return iam, errors.Join(errs...)
}

// validIAMUser accepts what can be an ElastiCache user id: printable ASCII
// without spaces, at most 128 characters (ElastiCache's own rule, a letter
// then letters, digits and hyphens, is left to ElastiCache).
func validIAMUser(u string) error {
	return validText(u, 128, notPrintable, "printable ASCII without spaces only")
}

// validText refuses s when it is longer than max bytes, or when it holds a
// character bad reports (the error is then want).
func validText(s string, max int, bad func(rune) bool, want string) error {
	if len(s) > max {
		return fmt.Errorf("at most %d characters", max)
	}
	if strings.ContainsFunc(s, bad) {
		return errors.New(want)
	}
	return nil
}

// notPrintable reports a character that is not printable ASCII or is a
// space.
func notPrintable(c rune) bool { return c <= ' ' || c > '~' }

// validCacheName accepts ElastiCache's replication group ids and serverless
// cache names, lower-cased: letters, digits and hyphens, at most 40.
func validCacheName(name string) error {
	return validText(name, 40, func(c rune) bool { return (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' }, "letters, digits and hyphens only")
}

// parseDenials parses HTTP_API_DENIALS, case-insensitively; anything but
// refuse or forward is reported and refused, the answer that holds for any
// integration.
func parseDenials(v string) (Denials, error) {
	switch d := Denials(strings.ToLower(v)); d {
	case "":
		return DefaultHTTPAPIDenials, nil
	case DenialsRefuse, DenialsForward:
		return d, nil
	default:
		return DefaultHTTPAPIDenials, fmt.Errorf("HTTP_API_DENIALS=%q: want %s or %s; using %s", truncate.Text(v, truncate.QuotedLen), DenialsRefuse, DenialsForward, DefaultHTTPAPIDenials)
	}
}

// parseAlgorithm parses an algorithm variable, falling back to def.
func parseAlgorithm(name, v string, def ratelimit.Algorithm) (ratelimit.Algorithm, error) {
	return orValue(name, v, def, def, algorithmNamed)
}

// algorithmNamed returns the algorithm spelled s, as RATE_LIMIT_ALGORITHM
// and the limit specs spell it: one of ratelimit.Algorithms(), by its name.
func algorithmNamed(s string) (ratelimit.Algorithm, error) {
	names := make([]string, 0, len(ratelimit.Algorithms()))
	for _, a := range ratelimit.Algorithms() {
		if string(a) == s {
			return a, nil
		}
		names = append(names, string(a))
	}
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return "", fmt.Errorf("unknown rate-limit algorithm %q (want one of %s)", s, strings.Join(names, ", "))
}

// makeOwnedLimit is makeLimitSpec's limit, owned by name.
func makeOwnedLimit(name, spec string, def ratelimit.Algorithm) (OwnedLimit, error) {
	l, own, err := makeLimitSpec(name, spec, def)
	return OwnedLimit{Limit: l, Owner: name, OwnAlgorithm: own}, err
}

// makeLimitSpec parses "<count>/<window>" or "<count>/<window>:<algorithm>"
// into a validated limit of the given name. Without an algorithm the limit
// gets def; own reports whether the spec named one. An explicit algorithm
// is spelled as in RATE_LIMIT_ALGORITHM; an empty one after ':' is an
// error, never the default.
func makeLimitSpec(name, spec string, def ratelimit.Algorithm) (l ratelimit.Limit, own bool, err error) {
	rate, algText, own := strings.Cut(spec, ":")
	alg := def
	if own {
		algText = strings.TrimSpace(algText)
		if algText == "" {
			return ratelimit.Limit{}, false, errors.New("no algorithm after ':'")
		}
		if alg, err = algorithmNamed(algText); err != nil {
			return ratelimit.Limit{}, false, err
		}
	}
	count, window, err := ParseRate(inHours(strings.TrimSpace(rate)))
	if err != nil {
		return ratelimit.Limit{}, false, err
	}
	l = ratelimit.Limit{Name: name, Count: count, Window: window, Algorithm: alg}
	if err := l.Validate(); err != nil {
		return ratelimit.Limit{}, false, err
	}
	return l, own, nil
}

// inHours rewrites a window in days ("10000/1d", "5/7d", "1/d"), which Go
// durations lack, in hours; any other rate is returned as it is.
func inHours(rate string) string {
	num, per, ok := strings.Cut(rate, "/")
	per = strings.TrimSpace(per)
	days, isDays := strings.CutSuffix(per, "d")
	if !ok || !isDays || len(days) > 3 {
		return rate
	}
	n := 1
	if days != "" {
		var err error
		if n, err = strconv.Atoi(days); err != nil || n < 1 || days[0] == '+' {
			return rate
		}
	}
	return num + "/" + strconv.Itoa(24*n) + "h"
}

// parseKeyHashes parses API_KEY_HASHES: comma-separated SHA-256 hex
// digests, each optionally followed by ":plan" (the key's plan). Bad
// entries are reported and skipped (there is no default key to use); a bad
// plan is reported and the key kept without a plan (its tier's limits).
// keyPlans is nil when no entry names a plan.
func parseKeyHashes(v string) (hashes map[string]struct{}, keyPlans map[string]string, err error) {
	hashes = make(map[string]struct{})
	var errs []error
	for _, part := range strings.Split(v, ",") {
		h, rawPlan, hasPlan := strings.Cut(strings.TrimSpace(part), ":")
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		if !isSHA256Hex(h) {
			errs = append(errs, fmt.Errorf("API_KEY_HASHES entry %q: want 64 hex digits (SHA-256 of the key), optionally :plan; skipped", truncate.Text(h, truncate.QuotedLen)))
			continue
		}
		hashes[h] = struct{}{}
		if !hasPlan {
			continue
		}
		plan, err := planName(rawPlan)
		if err != nil {
			errs = append(errs, fmt.Errorf("API_KEY_HASHES entry %s...: %w; the key is kept without a plan", h[:8], err))
			continue
		}
		if keyPlans == nil {
			keyPlans = make(map[string]string)
		}
		keyPlans[h] = plan
	}
	return hashes, keyPlans, errors.Join(errs...)
}

// parsePlanClaim reads JWT_PLAN_CLAIM: a claim name, or a namespaced claim
// URL such as https://example.com/plan; printable ASCII, at most 256 bytes.
func parsePlanClaim(v string) (string, error) {
	if len(v) > 256 {
		return "", fmt.Errorf("JWT_PLAN_CLAIM=%q: longer than 256 bytes; no plan is read from tokens", truncate.Text(v, truncate.QuotedLen))
	}
	if strings.ContainsFunc(v, notPrintable) {
		return "", fmt.Errorf("JWT_PLAN_CLAIM=%q: printable ASCII without spaces only; no plan is read from tokens", truncate.Text(v, truncate.QuotedLen))
	}
	return v, nil
}

// parseCostsVar parses RATE_LIMIT_COSTS and checks it against the limits
// it is spent on. A value with any bad entry, or with a cost some request
// could never pay, is rejected whole (every request then costs 1): a
// half-applied list would silently drop a cost the operator asked for.
func parseCostsVar(v string, tiers Tiers, plans Plans, routes []RouteLimit) ([]RouteCost, error) {
	costs, err := ParseCosts(v)
	if errors.Is(err, ErrDuplicateEntry) {
		if cerr := checkCosts(costs, tiers, plans, routes); cerr == nil {
			return costs, fmt.Errorf("RATE_LIMIT_COSTS=%q: %w; the highest matching cost applies", truncate.Text(v, truncate.QuotedLen), err)
		}
	}
	if err == nil {
		err = checkCosts(costs, tiers, plans, routes)
	}
	if err != nil {
		return nil, fmt.Errorf("RATE_LIMIT_COSTS=%q: %w; every request costs 1", truncate.Text(v, truncate.QuotedLen), err)
	}
	return costs, nil
}

// parseShadowVar parses RATE_LIMIT_SHADOW (or, on a stage, its stage
// variable) and checks that every name shadows something. A bad value is
// rejected whole: every limit is then enforced.
func parseShadowVar(variable, v string, tiers Tiers, plans Plans, routes []RouteLimit) (Shadow, error) {
	s, err := ParseShadow(v)
	if err == nil {
		err = checkShadowNames(s, tiers, plans, routes)
	}
	if err != nil {
		return Shadow{}, fmt.Errorf("%s=%q: %w; every limit is enforced", variable, truncate.Text(v, truncate.QuotedLen), err)
	}
	return s, nil
}

func isSHA256Hex(s string) bool {
	return len(s) == 64 && !strings.ContainsFunc(s, func(c rune) bool { return (c < '0' || c > '9') && (c < 'a' || c > 'f') })
}

// validKeyPrefix mirrors pkg/ratelimit's rule: printable ASCII, no braces
// (they would change the cluster hash tag), no spaces.
func validKeyPrefix(p string) error {
	return validText(p, 64, func(c rune) bool { return notPrintable(c) || c == '{' || c == '}' }, "printable ASCII without spaces or braces only")
}
