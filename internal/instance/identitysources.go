package instance

// The identity sources a runtime builds at cold start: the API key store
// and the bearer token verifier, whose keys load in the background.

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/slidegate/slidegate/internal/awsclients"
	"github.com/slidegate/slidegate/internal/identity"
)

// buildKeyStore returns the known API keys: API_KEY_HASHES, or the API
// Gateway keys, whose first listing it starts in the background (a failed
// listing is logged and retried later).
func (rt *Runtime) buildKeyStore(ctx context.Context, aws *awsclients.Clients, now func() time.Time, loads *coldStartLoads) identity.KeyStore {
	if rt.cfg.APIKeyHashes != nil {
		return identity.StaticKeyPlans{StaticKeys: rt.cfg.APIKeyHashes, Plans: rt.cfg.APIKeyPlans}
	}
	api, err := aws.APIGateway(ctx)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "no API Gateway client: requests with API keys count as anonymous",
			slog.String("error", err.Error()))
		return unverifiableKeys{}
	}
	keys := identity.NewGatewayKeys(api, rt.cfg.APIKeysRefresh, now, rt.logger)
	rt.gatewayKeys = keys
	loads.start("API Gateway keys", func(ctx context.Context) {
		if err := keys.Refresh(ctx); err != nil {
			rt.logger.LogAttrs(ctx, slog.LevelError, "list API Gateway keys at cold start failed; requests with keys count as anonymous until a listing succeeds",
				slog.String("error", err.Error()))
		}
	})
	return keys
}

// unverifiableKeys is the key store of a runtime that cannot list keys at
// all: every key is neither trusted nor refused.
type unverifiableKeys struct{}

// Lookup implements identity.KeyStore.
func (unverifiableKeys) Lookup(context.Context, string, string, string) identity.KeyStatus {
	return identity.KeyUnverifiable
}

// buildVerifier returns the bearer token verifier, or nil when no JWT key
// source is configured. It starts reading JWT_HS256_SECRET_ARN and fetching
// the JWKS in the background; until the secret is read HS256 tokens do not
// verify, and if it cannot be read, or is shorter than
// identity.MinHS256SecretLen, they never do (they are refused, not
// ignored).
func (rt *Runtime) buildVerifier(aws *awsclients.Clients, httpClient *http.Client, loads *coldStartLoads) *identity.Verifier {
	j := rt.cfg.JWT
	if !j.Enabled() {
		return nil
	}
	vc := identity.VerifierConfig{
		Issuer:     j.Issuer,
		Audience:   j.Audience,
		JWKSURL:    j.JWKSURL,
		HTTPClient: httpClient,
		Leeway:     j.Leeway,
		PlanClaim:  rt.cfg.JWTPlanClaim,
		Logger:     rt.logger,
	}
	if j.HS256SecretARN != "" {
		vc.HS256SecretPending = true
	} else {
		vc.HS256Secret = j.HS256Secret
	}
	v := identity.NewVerifier(vc)
	if arn := j.HS256SecretARN; arn != "" {
		loads.start("JWT_HS256_SECRET_ARN", func(ctx context.Context) {
			secret, err := aws.ReadSecret(ctx, arn)
			if err != nil {
				rt.logger.LogAttrs(ctx, slog.LevelError, "read JWT_HS256_SECRET_ARN failed; HS256 tokens will not verify", slog.String("error", err.Error()))
				return
			}
			if err := v.SetHS256Secret([]byte(secret)); err != nil {
				rt.logger.LogAttrs(ctx, slog.LevelError, "JWT_HS256_SECRET_ARN: secret refused; HS256 tokens will not verify", slog.String("error", err.Error()))
			}
		})
	}
	// A refused JWT_JWKS_URL (reported with the configuration) is never
	// fetched; the tokens it would verify are refused.
	if j.JWKSURL != "" && identity.CheckJWKSURL(j.JWKSURL) == nil {
		loads.start("JWKS", func(ctx context.Context) {
			if err := v.Prefetch(ctx); err != nil {
				rt.logger.LogAttrs(ctx, slog.LevelError, "fetch JWKS at cold start failed; fetched again in the background on a token with an unknown kid", slog.String("error", err.Error()))
			}
		})
	}
	return v
}
