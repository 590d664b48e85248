package identity

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
)

// KeyStatus is what a KeyStore knows of one key.
type KeyStatus int

// Key statuses.
const (
	// KeyUnknown: the key is not among the known keys.
	KeyUnknown KeyStatus = iota
	// KeyKnown: the key is known (and enabled).
	KeyKnown
	// KeyUnverifiable: the known keys could not be read at all yet, so the
	// key can be neither trusted nor rejected.
	KeyUnverifiable
)

// KeyStore knows which API keys are valid, by their SHA-256 hex.
type KeyStore interface {
	Lookup(ctx context.Context, hash string) KeyStatus
}

// StaticKeys is a fixed set of key hashes (API_KEY_HASHES).
type StaticKeys map[string]struct{}

// Lookup implements KeyStore.
func (s StaticKeys) Lookup(_ context.Context, hash string) KeyStatus {
	if _, ok := s[hash]; ok {
		return KeyKnown
	}
	return KeyUnknown
}

// APIKeyLister lists API Gateway API keys: *apigateway.Client, or anything
// answering GetApiKeys the same way.
type APIKeyLister = apigateway.GetApiKeysAPIClient

// Timing of GatewayKeys.
const (
	// UnknownKeyRefreshInterval is the least time between two listings
	// triggered by unknown keys (at most API_KEYS_REFRESH): a caller
	// spraying random keys costs at most one GetApiKeys call per interval
	// per instance.
	UnknownKeyRefreshInterval = 30 * time.Second
	// listTimeout bounds one listing, all pages included.
	listTimeout = 3 * time.Second
)

// GatewayKeys are the account's API Gateway API keys, listed with
// GetApiKeys (includeValues, every page), kept as hashes, refreshed every
// refresh interval when a request needs them, and at most once per
// UnknownKeyRefreshInterval on an unknown key (a key created a minute ago
// works without waiting for the refresh). Disabled keys are not known.
//
// GetApiKeys lists every key of the account and region, not only the keys
// of one API's usage plans: a key of another API in the same account is
// known too (and still needs its own usage plan to pass API Gateway's own
// key check when the method requires a key).
type GatewayKeys struct {
	lister  APIKeyLister
	refresh time.Duration
	unknown time.Duration
	now     func() time.Time
	logger  *slog.Logger

	mu       sync.Mutex
	hashes   map[string]struct{}
	loaded   bool
	loadedAt time.Time
	triedAt  time.Time
	hasTried bool
}

// NewGatewayKeys returns a key store over lister. now is time.Now when
// nil.
func NewGatewayKeys(lister APIKeyLister, refresh time.Duration, now func() time.Time, logger *slog.Logger) *GatewayKeys {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &GatewayKeys{
		lister:  lister,
		refresh: refresh,
		unknown: min(UnknownKeyRefreshInterval, refresh),
		now:     now,
		logger:  logger,
	}
}

// Lookup implements KeyStore. Listings happen inside Lookup, under a lock:
// concurrent lookups wait for one listing rather than start their own.
func (g *GatewayKeys) Lookup(ctx context.Context, hash string) KeyStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.loaded || now.Sub(g.loadedAt) >= g.refresh {
		g.tryRefreshLocked(ctx, now, g.unknown)
	}
	if _, ok := g.hashes[hash]; ok {
		return KeyKnown
	}
	if g.tryRefreshLocked(ctx, now, g.unknown) {
		if _, ok := g.hashes[hash]; ok {
			return KeyKnown
		}
	}
	if !g.loaded {
		return KeyUnverifiable
	}
	return KeyUnknown
}

// Refresh lists the keys now (at cold start, so that the first request does
// not wait for it).
func (g *GatewayKeys) Refresh(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.triedAt, g.hasTried = g.now(), true
	return g.listLocked(ctx)
}

// tryRefreshLocked lists the keys unless a listing was tried less than
// minGap ago; it reports whether a listing succeeded.
func (g *GatewayKeys) tryRefreshLocked(ctx context.Context, now time.Time, minGap time.Duration) bool {
	if g.hasTried && now.Sub(g.triedAt) < minGap {
		return false
	}
	g.triedAt, g.hasTried = now, true
	if err := g.listLocked(ctx); err != nil {
		g.logger.LogAttrs(ctx, slog.LevelError, "list API Gateway keys failed; keeping the previous list",
			slog.String("error", err.Error()), slog.Bool("everLoaded", g.loaded))
		return false
	}
	return true
}

func (g *GatewayKeys) listLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	hashes := make(map[string]struct{})
	pages := apigateway.NewGetApiKeysPaginator(g.lister, &apigateway.GetApiKeysInput{
		IncludeValues: aws.Bool(true),
		Limit:         aws.Int32(500),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("get api keys: %w", err)
		}
		for _, k := range page.Items {
			if k.Enabled && k.Value != nil && *k.Value != "" {
				hashes[KeyHash(*k.Value)] = struct{}{}
			}
		}
	}
	g.hashes, g.loaded, g.loadedAt = hashes, true, g.now()
	g.logger.LogAttrs(ctx, slog.LevelInfo, "listed API Gateway keys", slog.Int("enabledKeys", len(hashes)))
	return nil
}
