package identity

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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
	// Lookup says whether the key of hash is valid on the REST API apiID
	// (requestContext.apiId of the event; "" when the caller does not
	// know it). It never waits for the network.
	Lookup(ctx context.Context, apiID, hash string) KeyStatus
}

// StaticKeys is a fixed set of key hashes (API_KEY_HASHES), valid on every
// API.
type StaticKeys map[string]struct{}

// Lookup implements KeyStore.
func (s StaticKeys) Lookup(_ context.Context, _, hash string) KeyStatus {
	if _, ok := s[hash]; ok {
		return KeyKnown
	}
	return KeyUnknown
}

// GatewayAPI is the part of the API Gateway API that GatewayKeys reads:
// *apigateway.Client, or anything answering these calls the same way.
type GatewayAPI interface {
	apigateway.GetApiKeysAPIClient
	apigateway.GetUsagePlansAPIClient
	apigateway.GetUsagePlanKeysAPIClient
}

// Timing of GatewayKeys.
const (
	// UnknownKeyRefreshInterval is the least time between two listings
	// triggered by unknown keys (at most API_KEYS_REFRESH), and between a
	// failed listing and the next: a caller spraying random keys costs at
	// most one listing per interval per instance.
	UnknownKeyRefreshInterval = 30 * time.Second
	// listTimeout bounds one listing, every call and page included.
	// Listings run in the background: this bounds how long a stuck listing
	// holds back the next one, not how long any request waits.
	listTimeout = 30 * time.Second
	// listPageSize is the page size asked for (API Gateway's maximum).
	listPageSize = 500
	// planKeyReaders is how many usage plans' keys are read at once.
	planKeyReaders = 4
)

// GatewayKeys are the API Gateway API keys attached to the usage plans of
// each REST API, kept as hashes per API id.
//
// One listing reads every enabled key of the account and region
// (GetApiKeys with values), every usage plan (GetUsagePlans) and, for each
// plan with at least one API stage, the keys attached to it
// (GetUsagePlanKeys), joined by key id: a key is known on an API when it is
// enabled and attached to a usage plan with a stage of that API. A key of
// another API of the same account is not known. Every call reads every
// page; a listing with any failed call changes nothing.
//
// Listings never run on a request's path: the first one starts with
// Refresh at cold start, later ones in the background, one at a time, when
// a Lookup finds the list older than the refresh interval, or finds an
// unknown key (at most once per UnknownKeyRefreshInterval). Until a listing
// ends, lookups are answered from the previous one: a key created a minute
// ago is refused (KeyUnknown) until the listing its first use started has
// ended.
type GatewayKeys struct {
	api     GatewayAPI
	refresh time.Duration
	unknown time.Duration
	now     func() time.Time
	logger  *slog.Logger

	current     atomic.Pointer[keySnapshot]
	listings    *refresher
	warnNoAPIID sync.Once
}

// keySnapshot is the result of one listing.
type keySnapshot struct {
	listedAt time.Time
	// byAPI maps a REST API id to the hashes of the enabled keys attached
	// to a usage plan with a stage of that API.
	byAPI map[string]map[string]struct{}
	// account holds the hashes of every enabled key of the account and
	// region: the known keys of a lookup without an API id.
	account map[string]struct{}
}

// NewGatewayKeys returns a key store over api that has listed nothing yet
// (call Refresh). refresh is API_KEYS_REFRESH; now is time.Now when nil.
func NewGatewayKeys(api GatewayAPI, refresh time.Duration, now func() time.Time, logger *slog.Logger) *GatewayKeys {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := &GatewayKeys{
		api:     api,
		refresh: refresh,
		unknown: min(UnknownKeyRefreshInterval, refresh),
		now:     now,
		logger:  logger,
	}
	g.listings = &refresher{load: g.list, timeout: listTimeout, now: now}
	return g
}

// Lookup implements KeyStore. It answers from the last listing and never
// waits for one: a list that was never read gives KeyUnverifiable.
//
// An empty apiID (an event that did not say which API it is for) falls
// back to every enabled key of the account, with a warning logged once.
func (g *GatewayKeys) Lookup(ctx context.Context, apiID, hash string) KeyStatus {
	snap := g.current.Load()
	if snap == nil {
		g.listings.trigger(g.unknown)
		return KeyUnverifiable
	}
	if g.now().Sub(snap.listedAt) >= g.refresh {
		// Stale: list again, but not more often than a failing listing
		// may be retried.
		g.listings.trigger(g.unknown)
	}
	known := snap.account
	if apiID != "" {
		known = snap.byAPI[apiID]
	} else {
		g.warnNoAPIID.Do(func() {
			g.logger.LogAttrs(ctx, slog.LevelWarn, "request without an API id: API keys of every API of the account are trusted, not only those of this API's usage plans (set API_KEY_HASHES to choose the keys)")
		})
	}
	if _, ok := known[hash]; ok {
		return KeyKnown
	}
	g.listings.trigger(g.unknown)
	return KeyUnknown
}

// Refresh starts a listing, or joins the one in flight, and waits until it
// ends or ctx is done (the listing then goes on in the background). It is
// for cold start: the only wait for a listing a process ever does.
func (g *GatewayKeys) Refresh(ctx context.Context) error {
	return g.listings.trigger(0).wait(ctx)
}

// Wait waits until the listing in flight, if any, ends, and returns its
// error, or until ctx is done. It is for tests and tools that need a
// settled key list; lookups never wait.
func (g *GatewayKeys) Wait(ctx context.Context) error {
	if a := g.listings.current(); a != nil {
		return a.wait(ctx)
	}
	return nil
}

// list reads the keys and usage plans and, when every call succeeded,
// replaces the known keys.
func (g *GatewayKeys) list(ctx context.Context) error {
	started := g.now()
	snap, err := listGatewayKeys(ctx, g.api)
	if err != nil {
		g.logger.LogAttrs(ctx, slog.LevelError, "list API Gateway keys failed; keeping the previous list",
			slog.String("error", err.Error()), slog.Bool("everLoaded", g.current.Load() != nil))
		return err
	}
	snap.listedAt = started
	g.current.Store(snap)
	g.logger.LogAttrs(ctx, slog.LevelInfo, "listed API Gateway keys",
		slog.Int("enabledKeys", len(snap.account)), slog.Int("apis", len(snap.byAPI)))
	return nil
}

// listGatewayKeys does one listing.
func listGatewayKeys(ctx context.Context, api GatewayAPI) (*keySnapshot, error) {
	snap := &keySnapshot{byAPI: make(map[string]map[string]struct{}), account: make(map[string]struct{})}

	hashByID := make(map[string]string)
	keyPages := apigateway.NewGetApiKeysPaginator(api, &apigateway.GetApiKeysInput{
		IncludeValues: aws.Bool(true),
		Limit:         aws.Int32(listPageSize),
	})
	for keyPages.HasMorePages() {
		page, err := keyPages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("get api keys: %w", err)
		}
		for _, k := range page.Items {
			if k.Enabled && k.Id != nil && k.Value != nil && *k.Value != "" {
				h := KeyHash(*k.Value)
				hashByID[*k.Id] = h
				snap.account[h] = struct{}{}
			}
		}
	}

	type usagePlan struct {
		id     string
		apiIDs []string
	}
	var plans []usagePlan
	planPages := apigateway.NewGetUsagePlansPaginator(api, &apigateway.GetUsagePlansInput{Limit: aws.Int32(listPageSize)})
	for planPages.HasMorePages() {
		page, err := planPages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("get usage plans: %w", err)
		}
		for _, p := range page.Items {
			if p.Id == nil {
				continue
			}
			plan := usagePlan{id: *p.Id}
			for _, s := range p.ApiStages {
				if s.ApiId != nil && *s.ApiId != "" {
					plan.apiIDs = append(plan.apiIDs, *s.ApiId)
				}
			}
			if len(plan.apiIDs) > 0 {
				plans = append(plans, plan)
			}
		}
	}

	planIDs := make([]string, len(plans))
	for i, p := range plans {
		planIDs[i] = p.id
	}
	planHashes, err := readPlanKeys(ctx, api, planIDs, hashByID)
	if err != nil {
		return nil, err
	}
	for i, p := range plans {
		for _, apiID := range p.apiIDs {
			set := snap.byAPI[apiID]
			if set == nil {
				set = make(map[string]struct{})
				snap.byAPI[apiID] = set
			}
			for _, h := range planHashes[i] {
				set[h] = struct{}{}
			}
		}
	}
	return snap, nil
}

// readPlanKeys reads the keys of usage plans, planKeyReaders at a time,
// and returns, for each plan, the hashes of its keys found in hashByID
// (the enabled keys). The first failure cancels the rest and is returned.
func readPlanKeys(ctx context.Context, api GatewayAPI, planIDs []string, hashByID map[string]string) ([][]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([][]string, len(planIDs))
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan int)
	for range min(planKeyReaders, len(planIDs)) {
		wg.Go(func() {
			for i := range next {
				hashes, err := readOnePlanKeys(ctx, api, planIDs[i], hashByID)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					continue
				}
				out[i] = hashes
			}
		})
	}
	for i := range planIDs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, firstErr
}

func readOnePlanKeys(ctx context.Context, api GatewayAPI, planID string, hashByID map[string]string) ([]string, error) {
	var hashes []string
	pages := apigateway.NewGetUsagePlanKeysPaginator(api, &apigateway.GetUsagePlanKeysInput{
		UsagePlanId: aws.String(planID),
		Limit:       aws.Int32(listPageSize),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("get usage plan keys of plan %s: %w", planID, err)
		}
		for _, k := range page.Items {
			if k.Id == nil || (k.Type != nil && *k.Type != "API_KEY") {
				continue
			}
			// Only ids of enabled keys are in hashByID: a disabled key
			// stays unknown whatever plan it is attached to.
			if h, ok := hashByID[*k.Id]; ok {
				hashes = append(hashes, h)
			}
		}
	}
	return hashes, nil
}
