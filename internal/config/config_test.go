package config_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnvDefaults(t *testing.T) {
	cfg, err := config.FromEnv(envOf(nil))
	if err != nil {
		t.Fatalf("defaults reported errors: %v", err)
	}
	checks := []struct {
		name string
		got  string
		want string
	}{
		{"anonymous", cfg.Tiers.Anonymous.String(), "30/1m"},
		{"user", cfg.Tiers.User.String(), "600/1m"},
		{"org", cfg.Tiers.Org.String(), "10000/1m"},
		{"algorithm", string(cfg.Tiers.Algorithm), "sliding-window"},
		{"routes", cfg.Routes[0].Limits[0].Name + "=" + cfg.Routes[0].Limits[0].String() + ":" + string(cfg.Routes[0].Limits[0].Algorithm), "POST /auth/*=5/1m:sliding-log"},
		{"fail closed", cfg.FailClosed[0].Text, "/auth/*"},
		{"key prefix", cfg.KeyPrefix, "rl"},
		{"refresh", cfg.APIKeysRefresh.String(), "5m0s"},
		{"quota", cfg.Quota.Name + "=" + cfg.Quota.String(), "quota=10/1m"},
		{"HTTP API denials", string(cfg.HTTPAPIDenials), "refuse"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if cfg.APIKeyHashes != nil || cfg.JWT.Enabled() {
		t.Error("API key hashes or JWT enabled by default")
	}
}

// TestFromEnvBadValues: every bad value is reported naming the variable and
// the value, and the default is used.
func TestFromEnvBadValues(t *testing.T) {
	cases := []struct {
		variable, value string
		check           func(*config.Config) bool
	}{
		{"RATE_LIMIT_ANONYMOUS", "lots", func(c *config.Config) bool { return c.Tiers.Anonymous.String() == "30/1m" }},
		{"RATE_LIMIT_USER", "0/1m", func(c *config.Config) bool { return c.Tiers.User.String() == "600/1m" }},
		{"RATE_LIMIT_ORG", "10/0s", func(c *config.Config) bool { return c.Tiers.Org.String() == "10000/1m" }},
		{"RATE_LIMIT_ALGORITHM", "magic", func(c *config.Config) bool { return c.Tiers.Algorithm == ratelimit.SlidingWindow }},
		{"RATE_LIMIT_ROUTES", "POST /auth/*=5/1m,GET nope", func(c *config.Config) bool { return len(c.Routes) == 1 && c.Routes[0].Limits[0].Name == "POST /auth/*" }},
		{"RATE_LIMIT_FAIL_CLOSED", "auth", func(c *config.Config) bool { return len(c.FailClosed) == 1 && c.FailClosed[0].Text == "/auth/*" }},
		{"RATE_LIMIT_FALLBACK_INSTANCES", "-3", func(c *config.Config) bool { return c.FallbackInstances == 10 }},
		{"RATE_LIMIT_KEY_PREFIX", "a{b}", func(c *config.Config) bool { return c.KeyPrefix == "rl" }},
		{"API_KEYS_REFRESH", "soon", func(c *config.Config) bool { return c.APIKeysRefresh == 5*time.Minute }},
		{"API_KEY_HASHES", "xyz", func(c *config.Config) bool { return c.APIKeyHashes != nil && len(c.APIKeyHashes) == 0 }},
		{"REDIS_TIMEOUT", "fast", func(c *config.Config) bool { return c.Redis.Timeout == config.DefaultRedisTimeout }},
		{"REDIS_TLS_CA_FILE", "/nonexistent/ca.pem", func(c *config.Config) bool { return c.Redis.RootCAs == nil }},
		{"REDIS_CACHE_SERVERLESS", "maybe", func(c *config.Config) bool { return !c.RedisIAM.Serverless }},
		{"RATE_LIMIT_IPV6_PREFIX", "129", func(c *config.Config) bool { return c.IPv6Prefix == 64 }},
		{"RATE_LIMIT_IPV6_PREFIX", "31", func(c *config.Config) bool { return c.IPv6Prefix == 64 }},
		{"RATE_LIMIT_IPV6_PREFIX", "/64x", func(c *config.Config) bool { return c.IPv6Prefix == 64 }},
		{"RATE_LIMIT_QUOTA", "0/1m", func(c *config.Config) bool { return c.Quota.String() == "10/1m" }},
		{"HTTP_API_DENIALS", "allow", func(c *config.Config) bool { return c.HTTPAPIDenials == config.DenialsRefuse }},
	}
	for _, tc := range cases {
		t.Run(tc.variable, func(t *testing.T) {
			cfg, err := config.FromEnv(envOf(map[string]string{tc.variable: tc.value}))
			if err == nil || !strings.Contains(err.Error(), tc.variable) || !strings.Contains(err.Error(), tc.value) {
				t.Errorf("error %v does not name %s and %q", err, tc.variable, tc.value)
			}
			if !tc.check(cfg) {
				t.Errorf("%s=%q: default not used: %+v", tc.variable, tc.value, cfg)
			}
		})
	}
}

// TestFromEnvIPv6Prefix: RATE_LIMIT_IPV6_PREFIX takes 32 to 128 bits,
// with or without a leading slash; 64 by default.
func TestFromEnvIPv6Prefix(t *testing.T) {
	cases := []struct {
		value string
		want  int
	}{{"", 64}, {"32", 32}, {"/48", 48}, {" 56 ", 56}, {"128", 128}}
	for _, tc := range cases {
		cfg, err := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_IPV6_PREFIX": tc.value}))
		if err != nil || cfg.IPv6Prefix != tc.want {
			t.Errorf("RATE_LIMIT_IPV6_PREFIX=%q: %d (%v), want %d", tc.value, cfg.IPv6Prefix, err, tc.want)
		}
	}
}

// TestFromEnvHashKey: the identity hash key comes from a secret or, for
// local runs, RATE_LIMIT_HASH_KEY of at least 32 bytes; a shorter one is
// refused with an error that gives its length, never the key, and still
// counts as configured (identities are never hashed without it).
func TestFromEnvHashKey(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hash-AbCdEf"
	long := strings.Repeat("k", 32)
	cases := []struct {
		name       string
		env        map[string]string
		want       config.HashKey
		configured bool
		wantErr    string
	}{
		{"none", nil, config.HashKey{}, false, ""},
		{"local key", map[string]string{"RATE_LIMIT_HASH_KEY": long}, config.HashKey{Key: []byte(long)}, true, ""},
		{"secret", map[string]string{"RATE_LIMIT_HASH_KEY_SECRET_ARN": arn}, config.HashKey{SecretARN: arn}, true, ""},
		{"both: the secret", map[string]string{"RATE_LIMIT_HASH_KEY_SECRET_ARN": arn, "RATE_LIMIT_HASH_KEY": long}, config.HashKey{SecretARN: arn}, true, "both set"},
		{"short key refused", map[string]string{"RATE_LIMIT_HASH_KEY": "short-key-31-bytes-long-xxxxxxx"}, config.HashKey{Refused: true}, true, "RATE_LIMIT_HASH_KEY: 31 bytes; want at least 32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.FromEnv(envOf(tc.env))
			got := cfg.HashKey
			if got.SecretARN != tc.want.SecretARN || string(got.Key) != string(tc.want.Key) || got.Refused != tc.want.Refused || got.Configured() != tc.configured {
				t.Errorf("hash key %+v (configured %v), want %+v (configured %v)", got, got.Configured(), tc.want, tc.configured)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "short-key") || strings.Contains(err.Error(), long)) {
				t.Errorf("error %v quotes the key", err)
			}
		})
	}
}

// TestFromEnvRedisIAM: REDIS_IAM_USER turns IAM authentication on, with
// REDIS_CACHE_NAME required; what is missing or malformed is reported
// naming the variable, and leaves IAM off rather than half on.
func TestFromEnvRedisIAM(t *testing.T) {
	const tlsURL = "rediss://clustercfg.rate-limits.abc123.use1.cache.amazonaws.com:6379"
	cases := []struct {
		name    string
		env     map[string]string
		want    config.RedisIAM
		wantErr []string // substrings of the error; none: no error
	}{
		{"off by default", map[string]string{"REDIS_URL": tlsURL}, config.RedisIAM{}, nil},
		{"node-based cache", map[string]string{"REDIS_URL": tlsURL, "REDIS_IAM_USER": "slidegate-app", "REDIS_CACHE_NAME": "rate-limits"},
			config.RedisIAM{User: "slidegate-app", CacheName: "rate-limits"}, nil},
		{"serverless cache, name lower-cased", map[string]string{"REDIS_URL": tlsURL, "REDIS_IAM_USER": "slidegate-app", "REDIS_CACHE_NAME": "Rate-Limits", "REDIS_CACHE_SERVERLESS": "true"},
			config.RedisIAM{User: "slidegate-app", CacheName: "rate-limits", Serverless: true}, nil},
		{"no cache name", map[string]string{"REDIS_URL": tlsURL, "REDIS_IAM_USER": "slidegate-app"},
			config.RedisIAM{}, []string{"REDIS_CACHE_NAME", "required with REDIS_IAM_USER", "IAM authentication is off"}},
		{"cache name without a user", map[string]string{"REDIS_URL": tlsURL, "REDIS_CACHE_NAME": "rate-limits"},
			config.RedisIAM{}, []string{"REDIS_CACHE_NAME", "rate-limits", "REDIS_IAM_USER is not set"}},
		{"cache name that is not one", map[string]string{"REDIS_URL": tlsURL, "REDIS_IAM_USER": "slidegate-app", "REDIS_CACHE_NAME": "rate_limits.example"},
			config.RedisIAM{}, []string{"REDIS_CACHE_NAME", "rate_limits.example", "letters, digits and hyphens"}},
		{"user with a space", map[string]string{"REDIS_URL": tlsURL, "REDIS_IAM_USER": "slidegate app", "REDIS_CACHE_NAME": "rate-limits"},
			config.RedisIAM{}, []string{"REDIS_IAM_USER", "slidegate app", "IAM authentication is off"}},
		{"bad serverless flag", map[string]string{"REDIS_URL": tlsURL, "REDIS_IAM_USER": "slidegate-app", "REDIS_CACHE_NAME": "rate-limits", "REDIS_CACHE_SERVERLESS": "sure"},
			config.RedisIAM{User: "slidegate-app", CacheName: "rate-limits"}, []string{"REDIS_CACHE_SERVERLESS", "sure", "using false"}},
		{"plain redis:// URL", map[string]string{"REDIS_URL": "redis://localhost:6379", "REDIS_IAM_USER": "slidegate-app", "REDIS_CACHE_NAME": "rate-limits"},
			config.RedisIAM{User: "slidegate-app", CacheName: "rate-limits"}, []string{"REDIS_IAM_USER", "rediss://", "TLS only"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.FromEnv(envOf(tc.env))
			if cfg.RedisIAM != tc.want {
				t.Errorf("RedisIAM = %+v, want %+v", cfg.RedisIAM, tc.want)
			}
			if cfg.RedisIAM.Enabled() != (tc.want.User != "") {
				t.Errorf("Enabled() = %v", cfg.RedisIAM.Enabled())
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one saying %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestParseRoutes(t *testing.T) {
	routes, err := config.ParseRoutes(" post /auth/*=5/1m , ANY /search=100/10s,GET /v1/*/items=7/1h", "")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		method, path string
		want         []string
	}{
		{"POST", "/auth/login", []string{"POST /auth/*"}},
		{"GET", "/auth/login", nil},
		{"DELETE", "/search", []string{"* /search"}},
		{"GET", "/v1/9/items", []string{"GET /v1/*/items"}},
	}
	for _, tc := range cases {
		var got []string
		for _, r := range routesFor(routes, tc.method, tc.path) {
			got = append(got, r.Limits[0].Name)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s %s: %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
	if none, err := config.ParseRoutes("none", ""); err != nil || none != nil {
		t.Errorf("none: %v %v", none, err)
	}
}

// TestStageCache: stage variables override per stage, each distinct set is
// parsed (and a bad one reported) once, and the environment is untouched.
func TestStageCache(t *testing.T) {
	cfg, _ := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_ANONYMOUS": "3/1m"}))
	var reported []error
	cache := config.NewStageCache(cfg, func(err error) { reported = append(reported, err) })
	beta := map[string]string{"rateLimitAnonymous": "6/1m", "rateLimitAlgorithm": "token-bucket"}
	bad := map[string]string{"rateLimitUser": "many"}
	for i := 0; i < 3; i++ {
		// The default login limit names its algorithm: a stage's does not
		// replace it.
		if l := cache.For(beta); l.Tiers.Anonymous.String() != "6/1m" || l.Tiers.Algorithm != ratelimit.TokenBucket || l.Routes[0].Limits[0].Algorithm != ratelimit.SlidingLog {
			t.Fatalf("beta: %+v", l.Tiers)
		}
		if l := cache.For(nil); l.Tiers.Anonymous.String() != "3/1m" || l.Tiers.Algorithm != ratelimit.SlidingWindow {
			t.Fatalf("no stage variables: %+v", l.Tiers)
		}
		if l := cache.For(bad); l.Tiers.User.String() != "600/1m" {
			t.Fatalf("bad: %+v", l.Tiers)
		}
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "rateLimitUser") {
		t.Errorf("reported %v, want one error naming rateLimitUser", reported)
	}
	if a, b := cache.For(beta), cache.For(beta); a != b {
		t.Error("the same stage variables were parsed again")
	}
}

// TestStageCacheWarmSetParsesNothing: a request whose stage variables are
// the set already parsed finds its limits without parsing them again: no
// value trimmed, no key built, nothing allocated (the old cache built the
// plans' key on every request: 3 allocations here).
func TestStageCacheWarmSetParsesNothing(t *testing.T) {
	cfg, _ := config.FromEnv(envOf(nil))
	cache := config.NewStageCache(cfg, nil)
	vars := map[string]string{"rateLimitAnonymous": " 6/1m ", "rateLimitPlanPro": "100/1m", "rateLimitPlanGold": "1000/1m", "unrelated": "x"}
	parsed := cache.For(vars)
	if parsed.Tiers.Anonymous.String() != "6/1m" || len(parsed.Plans) == 0 {
		t.Fatalf("parsed: %+v", parsed)
	}
	// An event's stage variables are a new map each time.
	event := maps.Clone(vars)
	if allocs := testing.AllocsPerRun(100, func() {
		if cache.For(event) != parsed {
			t.Fatal("a parsed set was parsed again")
		}
	}); allocs != 0 {
		t.Errorf("a parsed set of stage variables costs %v allocations, want 0", allocs)
	}
}

// TestQuotaLimit: RATE_LIMIT_QUOTA is the quota route's limit, named
// "quota", in the stage's algorithm; rateLimitQuota overrides it per stage
// and a bad stage value keeps the environment's; HTTP_API_DENIALS reads
// forward and refuse in any case.
func TestQuotaLimit(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_QUOTA": "4/10s", "HTTP_API_DENIALS": "Forward"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAPIDenials != config.DenialsForward {
		t.Errorf("HTTP_API_DENIALS=Forward read as %q", cfg.HTTPAPIDenials)
	}
	var reported []error
	cache := config.NewStageCache(cfg, func(err error) { reported = append(reported, err) })
	tests := []struct {
		name      string
		stageVars map[string]string
		want      string
		algorithm ratelimit.Algorithm
	}{
		{"environment", nil, "4/10s", ratelimit.SlidingWindow},
		{"stage variable", map[string]string{"rateLimitQuota": "2/1m"}, "2/1m", ratelimit.SlidingWindow},
		{"stage algorithm", map[string]string{"rateLimitAlgorithm": "sliding-log"}, "4/10s", ratelimit.SlidingLog},
		{"bad stage variable", map[string]string{"rateLimitQuota": "never"}, "4/10s", ratelimit.SlidingWindow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := cache.For(tt.stageVars).Quota
			if q.Name != config.QuotaLimitName || q.String() != tt.want || q.Algorithm != tt.algorithm {
				t.Errorf("quota %s %s (%s), want quota %s (%s)", q.Name, q, q.Algorithm, tt.want, tt.algorithm)
			}
		})
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "rateLimitQuota") {
		t.Errorf("reported %v, want one error naming rateLimitQuota", reported)
	}
}

func FuzzRoutes(f *testing.F) {
	for _, s := range []string{"POST /auth/*=5/1m", "GET /a/*/b=1/1s,ANY /**=10/1h", "none", "", "=,", "POST /auth/*=5/1m,,", "GET /=1/1ms", "X /\x00=1/1m",
		"POST /auth/*=5/1m:sliding-log", "GET /s=1/1s:,HEAD /h=2/1m:token-bucket", "POST /a=5/1m:x:y", "POST /a=:", "GET /a=1/1m : gcra"} {
		f.Add(s, "/auth/login")
	}
	f.Add("POST /auth/*=5/1m:sliding-log", "/%61uth/./login%2F")
	f.Fuzz(func(t *testing.T, spec, path string) {
		routes, err := config.ParseRoutes(spec, "")
		if err != nil {
			return
		}
		for _, r := range routes {
			if err := r.Limits[0].Validate(); err != nil {
				t.Fatalf("ParseRoutes(%q) accepted an invalid limit: %v", spec, err)
			}
			if r.Limits[0].OwnAlgorithm && !strings.Contains(spec, ":") {
				t.Fatalf("ParseRoutes(%q): an algorithm of its own without a ':'", spec)
			}
			if !r.Limits[0].OwnAlgorithm && r.Limits[0].Algorithm != "" {
				t.Fatalf("ParseRoutes(%q): route %s got algorithm %s, want the default passed in", spec, r.Limits[0].Name, r.Limits[0].Algorithm)
			}
		}
		_, _ = config.ParseFailClosed(spec)
		_ = path
	})
}

func FuzzStageVariables(f *testing.F) {
	f.Add("6/1m", "600/1m", "10/1s", "token-bucket", "3/1m", "64", "10/1s,100/1m", "pro")
	f.Add("", "", "", "", "", "", "", "")
	f.Add("0/0", "x", "1/0.5ms", "leaky-bucket", "0/0", "31", "1/1m,1/60s", "pro-1m,user")
	f.Add("1000001/1m", "5/367d", "5/-1s", "SLIDING-WINDOW", "10/30d", "/48", ",", "nothing")
	f.Add("6/1m:sliding-log", "600/1m:", "10/1s:nope", "fixed-window", "5/1m:sliding-log", "129", "1/1d:leaky-bucket", "POST /auth/*")
	f.Add(":", "1/1m:token-bucket:x", " 5/1m : leaky-bucket ", "", ":", "-1", "5/1m,", "none")
	cfg, _ := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_PLANS": "pro=20/1s,600/1m", "RATE_LIMIT_COSTS": "POST /r=5"}))
	cache := config.NewStageCache(cfg, nil)
	f.Fuzz(func(t *testing.T, anonymous, user, org, algorithm, quota, ipv6Prefix, plan, shadow string) {
		l := cache.For(map[string]string{
			"rateLimitAnonymous":  anonymous,
			"rateLimitUser":       user,
			"rateLimitOrg":        org,
			"rateLimitAlgorithm":  algorithm,
			"rateLimitQuota":      quota,
			"rateLimitIpv6Prefix": ipv6Prefix,
			"rateLimitPlan_pro":   plan,
			"rateLimitShadow":     shadow,
		})
		for _, list := range append([]config.LimitList{l.Tiers.Anonymous, l.Tiers.User, l.Tiers.Org}, l.Plans["pro"]) {
			for _, lim := range list {
				if err := lim.Validate(); err != nil {
					t.Fatalf("stage variables gave an unusable limit: %v", err)
				}
				if lim.Burst() < 5 {
					t.Fatalf("stage variables gave limit %s below the cost 5 of POST /r", lim.Name)
				}
			}
		}
		for _, lim := range []ratelimit.Limit{l.Tiers.Anonymous[0].Limit, l.Tiers.User[0].Limit, l.Tiers.Org[0].Limit, l.Quota.Limit} {
			if err := lim.Validate(); err != nil {
				t.Fatalf("stage variables gave an unusable limit: %v", err)
			}
		}
		own := []bool{l.Tiers.Anonymous[0].OwnAlgorithm, l.Tiers.User[0].OwnAlgorithm, l.Tiers.Org[0].OwnAlgorithm}
		for i, lim := range []ratelimit.Limit{l.Tiers.Anonymous[0].Limit, l.Tiers.User[0].Limit, l.Tiers.Org[0].Limit} {
			if !own[i] && lim.Algorithm != l.Tiers.Algorithm {
				t.Fatalf("tier algorithm %s differs from the stage's %s though the tier names none", lim.Algorithm, l.Tiers.Algorithm)
			}
		}
		if l.IPv6Prefix < 32 || l.IPv6Prefix > 128 {
			t.Fatalf("stage variables gave IPv6 prefix %d, outside 32..128", l.IPv6Prefix)
		}
	})
}

// TestFromEnvJWT: JWT_LEEWAY is a bounded duration, JWT_JWKS_URL must be
// https (http for a loopback host only) and JWT_HS256_SECRET at least 32
// bytes; each bad value is reported naming the variable (and never quoting
// the secret), and a refused URL or secret is kept so that the verifier
// refuses the tokens it would have checked instead of ignoring them.
func TestFromEnvJWT(t *testing.T) {
	base := map[string]string{"JWT_ISSUER": "https://issuer.example/", "JWT_AUDIENCE": "api"}
	short := "only-31-bytes-of-hs256-secret!!"
	cases := []struct {
		name       string
		env        map[string]string
		wantErr    string // "" for none
		wantLeeway time.Duration
	}{
		{"leeway default", nil, "", 5 * time.Second},
		{"leeway set", map[string]string{"JWT_LEEWAY": "30s"}, "", 30 * time.Second},
		{"leeway zero", map[string]string{"JWT_LEEWAY": "0s"}, "", 0},
		{"leeway at the bound", map[string]string{"JWT_LEEWAY": "5m"}, "", 5 * time.Minute},
		{"leeway over the bound", map[string]string{"JWT_LEEWAY": "6m"}, `JWT_LEEWAY="6m"`, 5 * time.Second},
		{"leeway negative", map[string]string{"JWT_LEEWAY": "-1s"}, `JWT_LEEWAY="-1s"`, 5 * time.Second},
		{"leeway not a duration", map[string]string{"JWT_LEEWAY": "5"}, `JWT_LEEWAY="5"`, 5 * time.Second},
		{"https JWKS URL", map[string]string{"JWT_JWKS_URL": "https://issuer.example/.well-known/jwks.json"}, "", 5 * time.Second},
		{"http JWKS URL on loopback", map[string]string{"JWT_JWKS_URL": "http://127.0.0.1:8080/jwks"}, "", 5 * time.Second},
		{"http JWKS URL on localhost", map[string]string{"JWT_JWKS_URL": "http://localhost:8080/jwks"}, "", 5 * time.Second},
		{"http JWKS URL elsewhere", map[string]string{"JWT_JWKS_URL": "http://issuer.example/jwks"}, `JWT_JWKS_URL="http://issuer.example/jwks"`, 5 * time.Second},
		{"JWKS URL without a host", map[string]string{"JWT_JWKS_URL": "issuer.example/jwks"}, `JWT_JWKS_URL="issuer.example/jwks"`, 5 * time.Second},
		{"HS256 secret of 32 bytes", map[string]string{"JWT_HS256_SECRET": short + "!"}, "", 5 * time.Second},
		{"HS256 secret of 31 bytes", map[string]string{"JWT_HS256_SECRET": short}, "JWT_HS256_SECRET: 31 bytes, want at least 32", 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			cfg, err := config.FromEnv(envOf(env))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), short) {
				t.Error("the error quotes the HS256 secret")
			}
			if cfg.JWT.Leeway != tc.wantLeeway {
				t.Errorf("leeway %s, want %s", cfg.JWT.Leeway, tc.wantLeeway)
			}
			if u := tc.env["JWT_JWKS_URL"]; cfg.JWT.JWKSURL != u {
				t.Errorf("JWKS URL %q, want %q kept as given", cfg.JWT.JWKSURL, u)
			}
			if s := tc.env["JWT_HS256_SECRET"]; string(cfg.JWT.HS256Secret) != s {
				t.Error("HS256 secret not kept as given")
			}
		})
	}
}

// routesFor is the route limits that hold a request, as the functions
// pick them (internal/policy): method upper case, path as received.
func routesFor(routes []config.RouteLimit, method, path string) []config.RouteLimit {
	limits := &config.Limits{Routes: routes}
	return policy.Stage{Limits: limits}.RouteLimits(strings.ToUpper(method), path)
}
