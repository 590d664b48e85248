package instance

// The cold-start loads: what NewRuntime starts in the background, how long
// a request waits for them, and how a test or tool waits until they end.

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// logBudgetSpent logs, once per runtime, that the cold-start budget ran
// out with loads still pending.
func (rt *Runtime) logBudgetSpent(ctx context.Context, loads *coldStartLoads) {
	rt.budgetSpentLogged.Do(func() {
		rt.logger.LogAttrs(ctx, slog.LevelWarn, "cold-start budget spent; the rest loads in the background (API keys count as anonymous and bearer tokens do not verify until their keys arrive)",
			slog.Duration("budget", rt.coldStartBudget), slog.Any("loading", loads.pending()))
	})
}

// awaitIdentity waits, for a request that carries an API key or a bearer
// token (headers with lower-case names, apigw.Request's constructors), until the cold-start loads of the
// identity sources (API key listing, JWKS, HS256 secret) have ended, the
// cold-start budget is spent, or ctx ends. Requests without credentials,
// and every request once the loads have ended, never wait.
func (rt *Runtime) awaitIdentity(ctx context.Context, headers map[string]string) {
	select {
	case <-rt.identityLoaded:
		return
	default:
	}
	if headers["x-api-key"] == "" && headers["authorization"] == "" {
		return
	}
	wait := time.Until(rt.coldStartDeadline)
	if wait <= 0 {
		rt.logBudgetSpent(ctx, rt.identityLoads)
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-rt.identityLoaded:
	case <-timer.C:
		rt.logBudgetSpent(ctx, rt.identityLoads)
	case <-ctx.Done():
	}
}

// coldStartLoads are the loads NewRuntime starts in the background: it
// waits for them until its deadline, and they go on after it, each bounded
// by its own timeout.
type coldStartLoads struct {
	// ctx is NewRuntime's context without its cancellation: a load that
	// outlives NewRuntime is not cut short by the caller's context ending.
	ctx context.Context
	wg  sync.WaitGroup

	mu      sync.Mutex
	loading map[string]struct{}
}

// start runs load in the background under name (for the log).
func (l *coldStartLoads) start(name string, load func(context.Context)) {
	l.mu.Lock()
	if l.loading == nil {
		l.loading = make(map[string]struct{})
	}
	l.loading[name] = struct{}{}
	l.mu.Unlock()
	l.wg.Go(func() {
		load(l.ctx)
		l.mu.Lock()
		delete(l.loading, name)
		l.mu.Unlock()
	})
}

// finished returns a channel closed when every load started so far has
// ended.
func (l *coldStartLoads) finished() chan struct{} {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	return done
}

// pending names the loads still running, sorted.
func (l *coldStartLoads) pending() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.loading))
}

// WaitLoaded waits until nothing the runtime loads in the background is in
// flight (the cold-start loads that outlived the cold-start budget, the
// first connection to Redis, the script preload, API key listings, JWKS
// fetches), or until ctx is done. Decisions never wait for
// these loads; this is for tests and tools that need a settled runtime.
// The error is ctx's, or that of the last listing or fetch waited for.
func (rt *Runtime) WaitLoaded(ctx context.Context) error {
	for _, loaded := range []chan struct{}{rt.dialled, rt.coldStartLoaded, rt.identityLoaded, rt.scriptsLoaded} {
		select {
		case <-loaded:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var errs []error
	if rt.gatewayKeys != nil {
		errs = append(errs, rt.gatewayKeys.Wait(ctx))
	}
	if rt.verifier != nil {
		errs = append(errs, rt.verifier.Wait(ctx))
	}
	return errors.Join(errs...)
}
