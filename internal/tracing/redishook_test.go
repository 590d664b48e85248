//go:build !noxray

package tracing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// replyError is an error reply as go-redis reports it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestFaultsAreCallsRedisDidNotServe(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		fault bool
	}{
		{"timeout", fmt.Errorf("run script: %w", context.DeadlineExceeded), true},
		{"network timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"refused connection", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, true},
		{"closed client", redis.ErrClosed, true},
		{"server loading its data", replyError("LOADING Redis is loading the dataset in memory"), true},
		{"cluster down", replyError("CLUSTERDOWN The cluster is down"), true},
		{"script busy", replyError("BUSY Redis is busy running a script."), true},
		{"out of memory", replyError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{"caller gave up", fmt.Errorf("decide: %w", context.Canceled), false},
		{"script not cached", replyError("NOSCRIPT No matching script. Please use EVAL."), false},
		{"wrong type", replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"wrong password", replyError("WRONGPASS invalid username-password pair or user is disabled."), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isFault(tt.err); got != tt.fault {
				t.Errorf("isFault(%v) = %v, want %v", tt.err, got, tt.fault)
			}
		})
	}
}

// TestCommandOutcome: a command other than a decision script is "error"
// when it failed and "ok" otherwise, a missing key being an answer; a
// decision script is read by its RateLimitVerdict (ratelimit's own tests
// cover every script and reply shape).
func TestCommandOutcome(t *testing.T) {
	ctx := context.Background()
	ran := func(val any, err error, args ...any) redis.Cmder {
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetVal(val)
		cmd.SetErr(err)
		return cmd
	}
	tests := []struct {
		name string
		cmd  redis.Cmder
		want string
	}{
		{"a missing key is not a failure", ran(nil, redis.Nil, "get", "k"), outcomeOK},
		{"another command that failed", ran(nil, errors.New("dial tcp: connection refused"), "ping"), outcomeError},
		{"someone else's script is just ok", ran([]any{int64(0), int64(1)}, nil, "evalsha", "0123456789abcdef0123456789abcdef01234567", 1, "k"), outcomeOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commandOutcome(tt.cmd); got != tt.want {
				t.Errorf("commandOutcome = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPipelineOutcome(t *testing.T) {
	ctx := context.Background()
	ok := func() redis.Cmder {
		c := redis.NewStatusCmd(ctx, "ping")
		c.SetVal("PONG")
		return c
	}
	failing := func(err error) redis.Cmder {
		c := redis.NewStringCmd(ctx, "get", "k")
		c.SetErr(err)
		return c
	}
	tests := []struct {
		name      string
		cmds      []redis.Cmder
		err       error
		want      string
		wantCause bool
	}{
		{"every command answered", []redis.Cmder{ok(), failing(redis.Nil)}, nil, "ok", false},
		{"one command failed", []redis.Cmder{ok(), failing(replyError("WRONGTYPE"))}, nil, "error", true},
		{"the round trip failed", []redis.Cmder{ok()}, context.DeadlineExceeded, "error", true},
		{"a missing key is an answer", []redis.Cmder{failing(redis.Nil)}, redis.Nil, "ok", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cause := pipelineOutcome(tt.cmds, tt.err)
			if got != tt.want || (cause != nil) != tt.wantCause {
				t.Errorf("pipelineOutcome = %q, %v; want %q, a cause: %v", got, cause, tt.want, tt.wantCause)
			}
		})
	}
}

// BenchmarkHookOverheadUntraced is the hook alone, on an untraced call,
// with WithTier: what every Redis call outside a trace pays, without the
// noise of a round trip.
func BenchmarkHookOverheadUntraced(b *testing.B) {
	// A context as deep as a Lambda invocation's by the time it decides.
	ctx := context.Background()
	type depth int
	for i := range 8 {
		ctx = context.WithValue(ctx, depth(i), i)
	}
	cmd := redis.NewCmd(ctx, "evalsha", "0123456789abcdef0123456789abcdef01234567", 1, "k")
	process := redisHook{}.ProcessHook(func(context.Context, redis.Cmder) error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		if err := process(WithTier(ctx, "anonymous"), cmd); err != nil {
			b.Fatal(err)
		}
	}
}
