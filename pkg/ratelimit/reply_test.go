package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// What decisionReply says of a command, in a word: one of ours that
// admitted, denied or failed (an error, or a reply that is not a
// decision), or another command.
const (
	replyAllowed = "allowed"
	replyDenied  = "denied"
	replyError   = "error"
	replyOther   = "other"
)

// replyWord is decisionReply's answer for cmd in a word.
func replyWord(cmd redis.Cmder) string { return verdictWord(decisionReply(cmd)) }

// verdictWord is a verdict in a word.
func verdictWord(allowed, ours bool, err error) string {
	switch {
	case !ours:
		if allowed || err != nil {
			return "other, with a verdict or an error"
		}
		return replyOther
	case err != nil:
		if allowed {
			return "error, and allowed"
		}
		return replyError
	case allowed:
		return replyAllowed
	default:
		return replyDenied
	}
}

func TestDecisionReplyClassifiesCommands(t *testing.T) {
	ctx := context.Background()
	scripts := newScriptSet(false)
	gcra := scripts.forAlgorithm(TokenBucket)
	decision := func(allowed int64, limits int) []any {
		reply := []any{allowed, int64(1_700_000_000_000_000)}
		for range limits {
			reply = append(reply, allowed, int64(3), int64(1000), int64(0))
		}
		return reply
	}
	ran := func(val any, err error, args ...any) redis.Cmder {
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetVal(val)
		cmd.SetErr(err)
		return cmd
	}
	evalsha := func(sha string) []any { return []any{"evalsha", sha, 1, "rl:{tag}:x", "", "1", "1"} }
	tests := []struct {
		name string
		cmd  redis.Cmder
		want string
	}{
		{"EVALSHA of a script that admits", ran(decision(1, 1), nil, evalsha(gcra.sha())...), replyAllowed},
		{"EVALSHA of a script that denies", ran(decision(0, 1), nil, evalsha(gcra.sha())...), replyDenied},
		{"several limits, one call: the call's verdict", ran(decision(0, 3), nil, evalsha(scripts.slidingWindow.sha())...), replyDenied},
		{"the Limiter's no-retry wrapper is seen through", noRetryCmd{ran(decision(1, 1), nil, evalsha(gcra.sha())...).(*redis.Cmd)}, replyAllowed},
		{"EVAL of a script's source (NOSCRIPT fallback)", ran(decision(1, 1), nil, "eval", gcra.src(), 1, "k", "", "1", "1"), replyAllowed},
		{"verb in capitals", ran(decision(0, 1), nil, "EVALSHA", gcra.sha(), 1, "k"), replyDenied},
		{"NOSCRIPT is an error", ran(nil, redisError("NOSCRIPT No matching script."), evalsha(gcra.sha())...), replyError},
		{"no reply is an error", ran(nil, context.DeadlineExceeded, evalsha(gcra.sha())...), replyError},
		{"a reply that is not a decision is an error", ran([]any{int64(1)}, nil, evalsha(gcra.sha())...), replyError},
		{"a reply of the wrong length is an error", ran(decision(1, 1)[:5], nil, evalsha(gcra.sha())...), replyError},
		{"a verdict that is neither 0 nor 1 is an error", ran(decision(2, 1), nil, evalsha(gcra.sha())...), replyError},
		{"a concurrency acquire that got a slot", ran([]any{int64(1), int64(1_700_000_000_000_000), int64(1), int64(5), int64(5)}, nil, evalsha(scripts.acquire.sha())...), replyAllowed},
		{"a concurrency acquire that did not", ran([]any{int64(0), int64(1_700_000_000_000_000), int64(3), int64(5), int64(9)}, nil, evalsha(scripts.acquire.sha())...), replyDenied},
		{"a concurrency release is not a decision", ran([]any{int64(1)}, nil, evalsha(scripts.release.sha())...), replyOther},
		{"someone else's script is not ours", ran(decision(0, 1), nil, evalsha("0123456789abcdef0123456789abcdef01234567")...), replyOther},
		{"SCRIPT LOAD is not a decision", ran(gcra.sha(), nil, "script", "load", gcra.src()), replyOther},
		{"a missing key is not ours", ran(nil, redis.Nil, "get", "k"), replyOther},
		{"another command that failed is not ours", ran(nil, errors.New("dial tcp: connection refused"), "ping"), replyOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replyWord(tt.cmd); got != tt.want {
				t.Errorf("decisionReply = %q, want %q", got, tt.want)
			}
		})
	}
}

// redisError is an error reply as go-redis reports it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// outcomeRecorder is a go-redis hook that classifies every command it sees
// once it has run by its RateLimitVerdict, as a tracing hook does.
type outcomeRecorder struct {
	mu       sync.Mutex
	outcomes []string
}

func (r *outcomeRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *outcomeRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.mu.Lock()
		r.outcomes = append(r.outcomes, verdictWord(hookVerdict(cmd)))
		r.mu.Unlock()
		return err
	}
}

func (r *outcomeRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *outcomeRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.outcomes
	r.outcomes = nil
	return got
}

// TestDecisionReplyReadsRealScriptReplies runs every algorithm's script on a
// real server, through a go-redis hook: the Limiter's script calls pass
// through hooks, and their replies classify as the decisions they are.
func TestDecisionReplyReadsRealScriptReplies(t *testing.T) {
	server := redistest.StartServer(t)
	ctx := context.Background()
	client, err := redisclient.New(redisclient.Config{URL: server.URL(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	// Connect first: a new connection's own commands (HELLO) pass through
	// hooks too.
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	recorder := &outcomeRecorder{}
	client.AddHook(recorder)
	l, err := NewLimiter(client, Options{KeyPrefix: "outcome"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recorder.take(); len(got) != len(l.scripts.all()) || got[0] != replyOther {
		t.Fatalf("SCRIPT LOAD outcomes = %v, want one %q per script", got, replyOther)
	}

	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			check := Check{Identity: "203.0.113.7/" + string(alg), Limit: Limit{Name: "one", Count: 1, Window: time.Minute, Algorithm: alg}}
			steps := []struct {
				name string
				run  func() (Result, error)
				want string
			}{
				{"peek at a fresh limit", func() (Result, error) { return l.peek(ctx, 1, check) }, replyAllowed},
				{"spend the only unit", func() (Result, error) { return l.Decide(ctx, 1, check) }, replyAllowed},
				{"over the limit", func() (Result, error) { return l.Decide(ctx, 1, check) }, replyDenied},
				{"peek over the limit", func() (Result, error) { return l.peek(ctx, 1, check) }, replyDenied},
			}
			for _, s := range steps {
				res, err := s.run()
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				got := recorder.take()
				if len(got) != 1 || got[0] != s.want {
					t.Fatalf("%s: outcomes %v, want exactly [%s]", s.name, got, s.want)
				}
				if res.Allowed != (s.want == replyAllowed) {
					t.Fatalf("%s: Result.Allowed = %v but the reply was classified %q", s.name, res.Allowed, s.want)
				}
			}
		})
	}

	t.Run("concurrency", func(t *testing.T) {
		limit := ConcurrencyLimit{Name: "exports", Max: 1, Lease: time.Minute}
		slot, err := l.acquireSlot(ctx, "203.0.113.7", limit)
		if err != nil || !slot.Acquired {
			t.Fatalf("acquire the only slot: %+v, %v", slot, err)
		}
		if got := recorder.take(); len(got) != 1 || got[0] != replyAllowed {
			t.Fatalf("acquire of a free slot: outcomes %v, want exactly [%s]", got, replyAllowed)
		}
		if again, err := l.acquireSlot(ctx, "203.0.113.7", limit); err != nil || again.Acquired {
			t.Fatalf("acquire past Max: %+v, %v", again, err)
		}
		if got := recorder.take(); len(got) != 1 || got[0] != replyDenied {
			t.Fatalf("acquire past Max: outcomes %v, want exactly [%s]", got, replyDenied)
		}
		if released, err := l.releaseSlot(ctx, slot); err != nil || !released {
			t.Fatalf("release: %v, %v", released, err)
		}
		if got := recorder.take(); len(got) != 1 || got[0] != replyOther {
			t.Fatalf("release: outcomes %v, want exactly [%s]", got, replyOther)
		}
	})
}

// hookVerdict is what a go-redis hook reads of a command it saw: the
// command's RateLimitVerdict, found as the package doc says, or not ours
// when it has none.
func hookVerdict(cmd redis.Cmder) (allowed, ours bool, err error) {
	v, ok := cmd.(interface {
		RateLimitVerdict() (allowed, ours bool, err error)
	})
	if !ok {
		return false, false, nil
	}
	return v.RateLimitVerdict()
}
