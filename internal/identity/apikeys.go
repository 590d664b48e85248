package identity

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
	// Lookup says whether the key of hash is valid on the stage stage of
	// the REST API apiID (requestContext.apiId and requestContext.stage of
	// the event; "" when the caller does not know them). It never waits
	// for the network.
	Lookup(ctx context.Context, apiID, stage, hash string) KeyStatus
}

// KeyPlanner is a KeyStore that also knows the plan of a known key.
type KeyPlanner interface {
	// KeyPlan returns the plan of the key of hash on the stage stage of the
	// REST API apiID, in NormalizePlan's form, "" for none. It never waits
	// for the network.
	KeyPlan(ctx context.Context, apiID, stage, hash string) string
}

// UsagePlanTag is the usage plan tag that names the slidegate plan of the
// usage plan's keys; without it, the usage plan's own name is the plan
// when it is a plan name (NormalizePlan).
const UsagePlanTag = "slidegate:plan"

// StaticKeyPlans are API_KEY_HASHES entries with their plans (entries
// written "hash:plan"): a KeyPlanner over StaticKeys.
type StaticKeyPlans struct {
	StaticKeys
	// Plans maps a key hash to its plan; a hash without an entry has none.
	Plans map[string]string
}

// KeyPlan implements KeyPlanner.
func (s StaticKeyPlans) KeyPlan(_ context.Context, _, _, hash string) string {
	return s.Plans[hash]
}

// StaticKeys is a fixed set of key hashes (API_KEY_HASHES), valid on every
// API and stage.
type StaticKeys map[string]struct{}

// Lookup implements KeyStore.
func (s StaticKeys) Lookup(_ context.Context, _, _, hash string) KeyStatus {
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

// Timing and bounds of GatewayKeys.
const (
	// FailedListingRetry is the wait after a failed listing before the
	// next (at most API_KEYS_REFRESH); it doubles with each consecutive
	// failure, up to API_KEYS_REFRESH.
	FailedListingRetry = 30 * time.Second
	// MaxUnknownKeys bounds the negative cache: the hashes of unknown keys
	// seen since the last listing, which trigger nothing when seen again.
	MaxUnknownKeys = 10_000
	// refreshJitter is the largest part of API_KEYS_REFRESH added at
	// random to each scheduled listing, so that instances started together
	// do not list together.
	refreshJitter = 10 // percent
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
// each stage of each REST API, kept as hashes.
//
// One listing reads every enabled key of the account and region
// (GetApiKeys with values), every usage plan (GetUsagePlans) and, for each
// plan with at least one API stage, the keys attached to it
// (GetUsagePlanKeys), joined by key id: a key is known on a stage of an
// API when it is enabled and attached to a usage plan that lists that API
// and that stage (apiStages). A key of another API of the same account,
// or of another stage of the same API, is not known. Every call reads
// every page; a listing with any failed call changes nothing. A listing
// costs 2 + (number of usage plans with stages) calls, more for lists
// longer than a page (500).
//
// Listings never run on a request's path, and start at most once per
// refresh interval (API_KEYS_REFRESH) whatever the traffic: the first
// starts with Refresh at cold start; the next is due one interval plus a
// random jitter (up to a tenth of it) after the last one started, and is
// started in the background by the first lookup after that time. An
// unknown key not seen since the last listing may start it as soon as the
// interval has passed, without waiting for the jitter; an unknown key seen
// again since the last listing (the negative cache: up to MaxUnknownKeys
// hashes, emptied by each listing) brings nothing forward. Either way, a
// spray of unknown keys costs at most one listing per interval per
// instance. A failed listing is tried again after FailedListingRetry,
// doubling with each consecutive failure, up to the interval. Until a listing ends, lookups
// are answered from the previous one: a key created or revoked in API
// Gateway is seen as such after the next listing, at most an interval
// (plus jitter and the listing's own time) later.
type GatewayKeys struct {
	api     GatewayAPI
	refresh time.Duration
	retry   time.Duration
	now     func() time.Time
	jitter  func(interval time.Duration) time.Duration // a random part of interval, up to refreshJitter percent
	logger  *slog.Logger

	current  atomic.Pointer[keySnapshot]
	listings *refresher
	// earliest is when, in Unix nanoseconds, a lookup may start the next
	// listing at all: the fast path of a lookup reads only this.
	earliest atomic.Int64

	mu       sync.Mutex
	due      time.Time // a lookup after due starts the next listing
	failures int       // consecutive failed listings

	warnNoAPIID sync.Once
	warnNoStage sync.Once
}

// apiStage is one stage of one REST API, as in a usage plan's apiStages.
type apiStage struct {
	apiID, stage string
}

// keySnapshot is the result of one listing.
type keySnapshot struct {
	// byStage maps a stage of a REST API to the hashes of the enabled keys
	// attached to a usage plan with that stage.
	byStage map[apiStage]map[string]struct{}
	// byAPI maps a REST API id to the hashes of the enabled keys attached
	// to a usage plan with any stage of it: the known keys of a lookup
	// without a stage.
	byAPI map[string]map[string]struct{}
	// account holds the hashes of every enabled key of the account and
	// region: the known keys of a lookup without an API id.
	account map[string]struct{}
	// plans maps a stage of a REST API to the plan of each key hash whose
	// usage plan on that stage names one (UsagePlanTag, or its name).
	plans map[apiStage]map[string]string
	// unknown is the negative cache of this listing.
	unknown unknownKeys
}

// unknownKeys is a bounded set of hashes of unknown keys.
type unknownKeys struct {
	mu     sync.Mutex
	hashes map[string]struct{}
}

// add adds hash and says whether it is new. A full set adds nothing and
// says every hash is new.
func (u *unknownKeys) add(hash string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.hashes[hash]; ok {
		return false
	}
	if u.hashes == nil {
		u.hashes = make(map[string]struct{})
	}
	if len(u.hashes) < MaxUnknownKeys {
		u.hashes[hash] = struct{}{}
	}
	return true
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
	refresh = max(refresh, time.Millisecond)
	g := &GatewayKeys{
		api:     api,
		refresh: refresh,
		retry:   min(FailedListingRetry, refresh),
		now:     now,
		jitter: func(d time.Duration) time.Duration {
			return rand.N(d*refreshJitter/100 + 1)
		},
		logger: logger,
	}
	g.listings = &refresher{load: g.list, timeout: listTimeout, now: now}
	return g
}

// Lookup implements KeyStore. It answers from the last listing and never
// waits for one: a list that was never read gives KeyUnverifiable.
//
// An empty apiID (an event that did not say which API it is for) falls
// back to every enabled key of the account, and an empty stage to the keys
// of every stage of apiID, each with a warning logged once.
func (g *GatewayKeys) Lookup(ctx context.Context, apiID, stage, hash string) KeyStatus {
	snap := g.current.Load()
	if snap == nil {
		g.schedule(false)
		return KeyUnverifiable
	}
	var known map[string]struct{}
	switch {
	case apiID == "":
		known = snap.account
		g.warnNoAPIID.Do(func() {
			g.logger.LogAttrs(ctx, slog.LevelWarn, "request without an API id: API keys of every API of the account are trusted, not only those of this API's usage plans (set API_KEY_HASHES to choose the keys)")
		})
	case stage == "":
		known = snap.byAPI[apiID]
		g.warnNoStage.Do(func() {
			g.logger.LogAttrs(ctx, slog.LevelWarn, "request without a stage: API keys of usage plans of every stage of the API are trusted",
				slog.String("apiId", apiID))
		})
	default:
		known = snap.byStage[apiStage{apiID: apiID, stage: stage}]
	}
	if _, ok := known[hash]; ok {
		g.schedule(false)
		return KeyKnown
	}
	// A key seen unknown before since the last listing changes nothing;
	// a new one may bring the next listing forward to the interval.
	g.schedule(snap.unknown.add(hash))
	return KeyUnknown
}

// KeyPlan implements KeyPlanner: the plan of the usage plan the key is
// attached to on the stage (API Gateway attaches a key to at most one usage
// plan per stage), from the last listing. A lookup without an API id or a
// stage has no plan.
func (g *GatewayKeys) KeyPlan(_ context.Context, apiID, stage, hash string) string {
	snap := g.current.Load()
	if snap == nil || apiID == "" || stage == "" {
		return ""
	}
	return snap.plans[apiStage{apiID: apiID, stage: stage}][hash]
}

// schedule starts the next listing in the background when it is due, or,
// for early, when the interval since the last one has passed. It never
// waits for the listing.
func (g *GatewayKeys) schedule(early bool) {
	now := g.now()
	if now.UnixNano() < g.earliest.Load() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.UnixNano() < g.earliest.Load() || (!early && now.Before(g.due)) {
		return
	}
	g.startLocked(now)
}

// startLocked starts a listing at now, or joins the one in flight, and
// sets when the next is due. g.mu is held.
func (g *GatewayKeys) startLocked(now time.Time) *loadAttempt {
	g.earliest.Store(now.Add(g.refresh).UnixNano())
	g.due = now.Add(g.refresh + g.jitter(g.refresh))
	return g.listings.trigger(0)
}

// Refresh starts a listing, or joins the one in flight, and waits until it
// ends or ctx is done (the listing then goes on in the background). It is
// for cold start: the only wait for a listing a process ever does.
func (g *GatewayKeys) Refresh(ctx context.Context) error {
	g.mu.Lock()
	a := g.listings.current()
	if a == nil {
		a = g.startLocked(g.now())
	}
	g.mu.Unlock()
	return a.wait(ctx)
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
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.failures++
		wait := g.retry
		for i := 1; i < g.failures && wait < g.refresh; i++ {
			wait *= 2
		}
		wait = min(wait, g.refresh)
		g.earliest.Store(started.Add(wait).UnixNano())
		g.due = started.Add(wait + g.jitter(wait))
		g.logger.LogAttrs(ctx, slog.LevelError, "list API Gateway keys failed; keeping the previous list",
			slog.String("error", err.Error()), slog.Bool("everLoaded", g.current.Load() != nil),
			slog.Int("consecutiveFailures", g.failures), slog.Duration("retryAfter", wait))
		return err
	}
	g.failures = 0
	g.current.Store(snap)
	g.logger.LogAttrs(ctx, slog.LevelInfo, "listed API Gateway keys",
		slog.Int("enabledKeys", len(snap.account)), slog.Int("apis", len(snap.byAPI)), slog.Int("apiStages", len(snap.byStage)))
	return nil
}

// listGatewayKeys does one listing.
func listGatewayKeys(ctx context.Context, api GatewayAPI) (*keySnapshot, error) {
	snap := &keySnapshot{
		byStage: make(map[apiStage]map[string]struct{}),
		byAPI:   make(map[string]map[string]struct{}),
		account: make(map[string]struct{}),
		plans:   make(map[apiStage]map[string]string),
	}

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
		plan   string // the slidegate plan of its keys, "" for none
		stages []apiStage
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
			plan := usagePlan{id: *p.Id, plan: usagePlanPlan(p.Tags, aws.ToString(p.Name))}
			for _, s := range p.ApiStages {
				if s.ApiId != nil && *s.ApiId != "" && s.Stage != nil && *s.Stage != "" {
					plan.stages = append(plan.stages, apiStage{apiID: *s.ApiId, stage: *s.Stage})
				}
			}
			if len(plan.stages) > 0 {
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
		for _, st := range p.stages {
			addHashes(snap.byStage, st, planHashes[i])
			addHashes(snap.byAPI, st.apiID, planHashes[i])
			if p.plan == "" {
				continue
			}
			byHash := snap.plans[st]
			if byHash == nil {
				byHash = make(map[string]string, len(planHashes[i]))
				snap.plans[st] = byHash
			}
			for _, h := range planHashes[i] {
				byHash[h] = p.plan
			}
		}
	}
	return snap, nil
}

// usagePlanPlan is the slidegate plan of a usage plan's keys: its
// UsagePlanTag tag when that is a plan name, else its own name when that
// is one, else none.
func usagePlanPlan(tags map[string]string, name string) string {
	if p, ok := NormalizePlan(tags[UsagePlanTag]); ok {
		return p
	}
	if p, ok := NormalizePlan(name); ok {
		return p
	}
	return ""
}

// addHashes adds hashes to the set of k in sets.
func addHashes[K comparable](sets map[K]map[string]struct{}, k K, hashes []string) {
	set := sets[k]
	if set == nil {
		set = make(map[string]struct{}, len(hashes))
		sets[k] = set
	}
	for _, h := range hashes {
		set[h] = struct{}{}
	}
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
