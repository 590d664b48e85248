package deployconfig

import (
	"crypto/sha256"
	"encoding/hex"
)

// What make local (cmd/localapi) provides that AWS would provide
// otherwise: known API keys, a JWT secret and an identity hash key. They
// apply only where the variable is unset in the environment and in the
// template. slidegate --local reads a stage with the same defaults, so
// that it resolves a caller exactly as make local's functions do.
const (
	// DemoAPIKey is a known API key (tier org, no plan).
	DemoAPIKey = "local-demo-key"
	// DemoProAPIKey is a known API key on plan pro (API_KEY_HASHES
	// "hash:pro"): the stage's RateLimitPlans says what pro allows.
	DemoProAPIKey = "local-pro-key"
	// DemoPlanClaim is JWT_PLAN_CLAIM with the demo JWT secret.
	DemoPlanClaim = "plan"
	// DemoJWTIssuer, DemoJWTAudience and DemoJWTSecret verify HS256
	// bearer tokens (tier user) when no JWT variable is set.
	DemoJWTIssuer   = "slidegate-local"
	DemoJWTAudience = "slidegate-local"
	DemoJWTSecret   = "slidegate-local-hs256-secret-for-demos"
	// DemoHashKey is the identity hash key (RATE_LIMIT_HASH_KEY) when
	// neither it nor RATE_LIMIT_HASH_KEY_SECRET_ARN is set. For local runs
	// only.
	DemoHashKey = "slidegate-local-only-identity-hash-key-0001"
)

// LocalDefaults are make local's defaults of a function whose template
// environment is template, given the process environment getenv: the
// demo keys (unless an AWS endpoint is given), the demo JWT settings when no JWT variable is set anywhere,
// and the demo hash key when no secret names one.
func LocalDefaults(getenv func(string) string, template map[string]string) map[string]string {
	defaults := map[string]string{}
	if getenv("JWT_ISSUER") == "" && getenv("JWT_AUDIENCE") == "" && getenv("JWT_JWKS_URL") == "" && getenv("JWT_HS256_SECRET") == "" &&
		template["JWT_ISSUER"] == "" && template["JWT_JWKS_URL"] == "" {
		defaults["JWT_ISSUER"] = DemoJWTIssuer
		defaults["JWT_AUDIENCE"] = DemoJWTAudience
		defaults["JWT_HS256_SECRET"] = DemoJWTSecret
		defaults["JWT_PLAN_CLAIM"] = DemoPlanClaim
	}
	// With an AWS endpoint of its own (AWS_ENDPOINT_URL, e.g. a
	// moto_server), API keys are those of its API Gateway, as in AWS: the
	// demo keys are no default then.
	if getenv("AWS_ENDPOINT_URL") == "" && getenv("AWS_ENDPOINT_URL_API_GATEWAY") == "" {
		demo := sha256.Sum256([]byte(DemoAPIKey))
		pro := sha256.Sum256([]byte(DemoProAPIKey))
		defaults["API_KEY_HASHES"] = hex.EncodeToString(demo[:]) + "," + hex.EncodeToString(pro[:]) + ":pro"
	}
	if getenv("RATE_LIMIT_HASH_KEY_SECRET_ARN") == "" {
		defaults["RATE_LIMIT_HASH_KEY"] = DemoHashKey
	}
	return defaults
}
