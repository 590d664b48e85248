// Package ratelimit decides whether a request may pass a set of rate limits,
// atomically, on Redis.
//
// Every decision is one Lua script call (EVALSHA) on one Redis node: the
// script reads the clock from Redis (TIME), reads the state of every limit of
// the request, and either spends the request's cost on all of them or on none.
// Many processes (Lambda instances, pods) can therefore share one budget
// without racing, and their own clocks never matter.
//
// The pieces, in the order a program uses them: [NewLimiter] builds the
// [Limiter] that decides on a go-redis client (package redisclient beside
// this one builds one with verified TLS and IAM authentication); a [Check] names an identity and the [Limit] it
// spends from; [Limiter.Decide] answers a [Result] holding one [Decision]
// per check; package httplimit writes the result's rate-limit headers
// (httplimit.SetHeaders), and their values one by one for answers that
// carry them other than in an http.Header. A [Gate]
// wraps the Limiter with what to do when Redis cannot answer
// ([Gate.Decide]), and is what peeks ([Gate.Peek]) and holds in-flight
// slots ([Gate.Acquire]). Errors wrap
// [ErrInvalid] (the request can never be decided) or [ErrUnavailable]
// (Redis could not decide it).
//
// Around them: a RateLimitVerdict method on every script command a
// Limiter sends, for a go-redis hook that traces or counts the decisions
// it sees (found by a type assertion, as go-redis finds NoRetry:
// cmd.(interface{ RateLimitVerdict() (allowed, ours bool, err error) }));
// and [Options].Now, the clock a test steps instead of Redis's.
//
// # Limits and algorithms
//
// A [Limit] is "Count units per Window" under one [Algorithm]:
//
//   - [SlidingWindow] (the default) approximates a rolling window from two
//     fixed windows kept in one key: the previous window's count weighted by
//     how much of it the rolling window still covers, plus the current one.
//     Constant memory; against an adversary who packs requests at the end of
//     one window it can admit just under 2x Count in one rolling window.
//   - [SlidingLog] keeps one sorted-set member per admitted unit and is exact:
//     never more than Count in any rolling window. Memory grows with Count.
//   - [TokenBucket] is GCRA with a burst of Count: up to Count at once, then
//     one every Window/Count.
//   - [LeakyBucket] is GCRA with a burst of 1: one every Window/Count, no
//     bursts at all. A request may cost at most 1.
//   - [FixedWindow] counts per aligned window. It is the baseline: up to
//     2x Count can pass in a moment that straddles a window edge.
//   - [SlidingBuckets] keeps ten sub-window counters in one key and admits
//     a request only if both a weighted sliding count and the plain sum of
//     the last eleven buckets allow it: bounded memory, and provably never
//     more than floor(1.1 x Count) in any rolling window (the proof is in
//     lua/sliding_buckets.lua).
//
// # What a decision promises
//
// A denied request spends nothing. A request of cost n is admitted only if
// all n units fit in every one of its limits. [Decision.RetryAfter] is exact
// for what the algorithm knows: with no other traffic, the same request made
// RetryAfter later is admitted, and made any earlier it is not (times are
// microseconds on the Redis clock; a sliding-window limit past 2^50 in
// count x microseconds sees that clock in whole milliseconds, see [Limit]).
// [Decision.ResetAfter] is when the limit
// would be entirely unused again.
//
// A [Check] marked Shadow is decided and reported but not enforced: the
// request is admitted iff every other check admits it, and the shadow check
// then spends only if it admits the request on its own, so its state is what
// enforcing it would have left. Its Decision says what it would have
// answered; [Result.RetryAfter] and the headers (httplimit.Closest) look
// past it.
//
// # Concurrency limits
//
// A [ConcurrencyLimit] bounds how many requests of one identity are in
// flight at once, where a rate limit counts arrivals. [Gate.Acquire]
// takes one of Max slots, held until [Gate.Release] or the end of its
// Lease on the Redis clock, whichever comes first: a holder that crashed
// frees its slot at its lease end, not before. Each is one script call on
// a sorted set of lease ends under the identity's hash tag, keyed by a
// random token per slot, so a release frees its own slot and no other,
// and releasing a slot Redis forgot (a restart, a failover) is a no-op. A
// denial's [Slot.RetryAfter] is a short hint (1s by default), not the
// earliest lease end, which may be a whole lease away.
//
// # Live controls
//
// Package controls, beside this one, holds the values of live controls:
// what a control is ([controls.Control], of a [controls.Kind]), its
// bounds, and what a decision applied ([controls.Applied]). This package
// stores and applies them.
//
// With [Options.Controls], the script call of an identity that holds a
// control (a key in its own hash slot, written by the operator's tools)
// also reads it and applies it in the same call: a block denies until its
// end, spending nothing; an exemption admits without spending; a scale
// decides every limit with its count multiplied, on the same keys.
// [Result.Control] says which applied. Which identities hold one, each
// process learns from one hash it reads at most once per
// [controls.Propagation] (the control watch, shared with
// [controls.NetworkControlCache]): every other decision is the plain script's, at
// its cost, and a new control reaches a warm process within
// controls.Propagation. A record that cannot be read is ignored (and
// reported Malformed); a Gate then keeps no denial in its deny cache
// longer than controls.Propagation. The in-memory fallback knows no
// controls.
//
// The operator's side writes them through the [controls.Store] that
// [Limiter.Controls] returns: Set, Lift, Get and List for identities (at
// most 10,000 in force), SetNetwork, LiftNetwork and Networks for networks
// (at most [controls.MaxNetworks]), which a process reads through one
// [controls.NetworkControlCache], at most once per [controls.Propagation].
//
// # When Redis cannot decide
//
// A Limiter returns ErrUnavailable. A Gate applies a [FailurePolicy]
// instead, per request: under [FailOpen] an in-memory limit per process,
// each limit divided by the expected number of instances, decides, and the
// Result is marked Degraded; under [FailClosed] the request gets
// ErrUnavailable, never an allowance Redis did not give. A circuit breaker
// stops calling a Redis that keeps failing, and a deny cache answers a
// caller Redis denied without asking again until its RetryAfter has
// passed.
//
// # Keys
//
// Identities are hashed (SHA-256, truncated to 128 bits, or HMAC-SHA-256 when
// [Options.IdentityHashKey] is set) before they enter a key, and the hash is
// the key's cluster hash tag: all limits of one identity live in one slot and
// are decided by one script call, and no caller can pick the slot. Every key
// expires within two windows of its last use.
package ratelimit
