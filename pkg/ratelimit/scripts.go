package ratelimit

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// script is one Lua script and its SHA-1, as EVALSHA wants it, composed
// and hashed on first use (src or sha): a function's cold start builds
// only the scripts its first decisions run, not the whole set, whose
// composing and hashing was most of the runtime's set-up on a small
// function. Safe for concurrent use.
type script struct {
	name    string
	compose func() string
	once    sync.Once
	text    string
	hash    string
}

// lazyScript is the script that compose makes, made on first use.
func lazyScript(name string, compose func() string) *script {
	return &script{name: name, compose: compose}
}

func (sc *script) build() {
	sc.text = sc.compose()
	sum := sha1.Sum([]byte(sc.text))
	sc.hash = hex.EncodeToString(sum[:])
	sc.compose = nil
}

// src is the script's source.
func (sc *script) src() string {
	sc.once.Do(sc.build)
	return sc.text
}

// sha is the hex SHA-1 of the script's source.
func (sc *script) sha() string {
	sc.once.Do(sc.build)
	return sc.hash
}

// scriptSet holds the script of every algorithm. Token and leaky buckets
// share the GCRA script; they differ only in the burst they pass. mixed
// decides the limits of one identity that use several algorithms in one
// call (lua/mixed.lua). acquire and release are the concurrency limits'
// (concurrency.go).
//
// controlled holds, when the Limiter reads live controls, the mixed
// decision composed with lua/control_read.lua, which reads the identity's
// control key (the last of KEYS) in the same call; mixed.lua applies the
// record and decides every shape, one group too. Like every script it is composed on first use:
// only a decision for an identity that may hold a control needs it. nil
// when controls are not read.
//
// Each algorithm's file is in each script that runs it once: the plain
// script is the file itself; the mixed and controlled scripts hold every
// algorithm's file once, as a function (algorithmTable). The fixed window
// has no script of its own: sliding_window.lua decides it, told so by the
// mixed script (its code 4), which decides a fixed-window group.
type scriptSet struct {
	slidingWindow, slidingLog, gcra, slidingBuckets *script
	mixed                                           *script
	acquire, release                                *script
	controlled                                      *script
}

// The process's scripts, shared by every Limiter and by decisionReply:
// they are embedded and never change, so each is composed and hashed once
// per process, on its first use. Nothing writes to them once built.
var (
	sharedScripts    = sync.OnceValue(func() scriptSet { return newScriptSet(false) })
	sharedControlled = sync.OnceValue(controlledScript)
)

// scriptSetFor is the process's script set, with the controlled script
// when controls are read.
func scriptSetFor(controls bool) scriptSet {
	s := sharedScripts()
	if controls {
		s.controlled = sharedControlled()
	}
	return s
}

// luaSources holds each embedded file's text once read (file name to
// string): the scripts are composed of the same few files many times over
// (every algorithm in two), and at a function's
// cold start each copy is fresh memory the process must fault in.
var luaSources sync.Map

func mustReadScript(file string) string {
	if src, ok := luaSources.Load(file); ok {
		return src.(string)
	}
	src, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		// The files are embedded at build time; a missing one is a build bug.
		panic(fmt.Sprintf("ratelimit: embedded script %s: %v", file, err))
	}
	text, _ := luaSources.LoadOrStore(file, sentForm(string(src)))
	return text.(string)
}

// sentForm is a script's source as it is sent to Redis: without its
// comment lines, blank lines and indentation, which Lua does not need and
// every SCRIPT LOAD, EVAL and script cache would otherwise carry. The
// scripts hold no multi-line string, so no line's meaning changes.
func sentForm(src string) string {
	var b strings.Builder
	b.Grow(len(src) / 2)
	for line := range strings.SplitSeq(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// mustLoadScript is the script of one embedded file, read on first use.
func mustLoadScript(file string) *script {
	return lazyScript(file, func() string { return mustReadScript(file) })
}

// newScriptSet makes a set of scripts, each composed on first use, with
// the controlled one when controls are read. A Limiter uses the shared
// set instead (scriptSetFor).
func newScriptSet(controls bool) scriptSet {
	s := scriptSet{
		slidingWindow:  mustLoadScript("sliding_window.lua"),
		slidingLog:     mustLoadScript("sliding_log.lua"),
		gcra:           mustLoadScript("gcra.lua"),
		slidingBuckets: mustLoadScript("sliding_buckets.lua"),
		acquire:        mustLoadScript("concurrency_acquire.lua"),
		release:        mustLoadScript("concurrency_release.lua"),
	}
	s.mixed = lazyScript("mixed.lua", func() string {
		return algorithmTable() + mustReadScript("mixed.lua")
	})
	if controls {
		s.controlled = controlledScript()
	}
	return s
}

// controlledScript makes the controlled script (scriptSet.controlled),
// composed on first use: the algorithms, lua/control_read.lua, which reads
// the identity's control record, then lua/mixed.lua, which applies it and
// decides.
func controlledScript() *script {
	return lazyScript("mixed.lua+control_read.lua", func() string {
		return algorithmTable() + mustReadScript("control_read.lua") + mustReadScript("mixed.lua")
	})
}

// mixedFiles is the script of each mixedCode.
var mixedFiles = [...]string{
	1: "sliding_window.lua",
	2: "sliding_log.lua",
	3: "gcra.lua",
	4: "sliding_window.lua", // told fixed: see algorithmTable
	5: "sliding_buckets.lua",
	6: "gcra.lua",
}

// algorithmTable is what lua/mixed.lua runs its groups with: the table
// algorithms, every algorithm's script once, as a function of its KEYS
// and ARGV, by its mixedCode as a string; and record, nil until
// lua/control_read.lua reads it. The fixed window's function is the sliding
// window's told fixed (its first extra argument, which the script reads
// as ...), the leaky bucket's the GCRA's.
func algorithmTable() string {
	var b strings.Builder
	b.WriteString("local algorithms, record = {}, nil\n")
	b.WriteString("algorithms['1'] = function(KEYS, ARGV, ...)\n" + mustReadScript(mixedFiles[1]) + "end\n")
	for _, code := range []int{2, 3, 5} {
		fmt.Fprintf(&b, "algorithms['%d'] = function(KEYS, ARGV)\n%send\n", code, mustReadScript(mixedFiles[code]))
	}
	b.WriteString("algorithms['4'] = function(KEYS, ARGV) return algorithms['1'](KEYS, ARGV, true) end\n")
	b.WriteString("algorithms['6'] = algorithms['3']\n")
	return b.String()
}

// mixedCode is an algorithm's code in mixed.lua.
func mixedCode(a Algorithm) int {
	switch a.orDefault() {
	case SlidingLog:
		return 2
	case TokenBucket:
		return 3
	case FixedWindow:
		return 4
	case SlidingBuckets:
		return 5
	case LeakyBucket:
		// The GCRA script again, told apart so that a scale control
		// keeps its burst of 1.
		return 6
	}
	return 1
}

func (s *scriptSet) forAlgorithm(a Algorithm) *script {
	switch a.orDefault() {
	case SlidingLog:
		return s.slidingLog
	case TokenBucket, LeakyBucket:
		return s.gcra
	case FixedWindow:
		// Decided by the mixed script (algorithmTable).
		return nil
	case SlidingBuckets:
		return s.slidingBuckets
	default:
		return s.slidingWindow
	}
}

func (s *scriptSet) all() []*script {
	all := []*script{s.slidingWindow, s.slidingLog, s.gcra, s.slidingBuckets, s.mixed, s.acquire, s.release}
	if s.controlled != nil {
		all = append(all, s.controlled)
	}
	return all
}

// loadOn loads every script into one node's script cache and checks that the
// node computed the SHA-1 this package will ask for.
func (s *scriptSet) loadOn(ctx context.Context, node scriptLoader) error {
	for _, sc := range s.all() {
		sha, err := node.ScriptLoad(ctx, sc.src()).Result()
		if err != nil {
			return fmt.Errorf("load script %s: %w", sc.name, err)
		}
		if sha != sc.sha() {
			return fmt.Errorf("load script %s: server returned SHA %s, want %s", sc.name, sha, sc.sha())
		}
	}
	return nil
}

// run executes the script with EVALSHA. When the node does not have it
// (NOSCRIPT: cache flushed, failover to a node that never saw it, restart),
// it falls back to EVAL, which runs the script and caches it again, so the
// caller never sees the error.
//
// Neither command is ever retried after a network error: a script whose
// reply was lost may already have spent, and running it again would charge
// the caller twice. (go-redis's cluster client retries EOFs and timeouts on
// its own whatever MaxRetries says; noRetryCmd opts out, while MOVED and ASK
// redirections, which are safe, are still followed.)
//
// cmd is the whole command: its first two values are set here (the verb and
// the SHA-1 or source), then come the key count, KEYS and ARGV.
func (sc *script) run(ctx context.Context, c rediser, cmd []any) ([]any, error) {
	cmd[0], cmd[1] = "evalsha", sc.sha()
	res, err := sc.call(ctx, c, cmd)
	if err != nil && isNoScript(err) {
		// A copy: the failed command, which hooks may have kept, keeps its
		// own arguments.
		cmd = append([]any{"eval", sc.src()}, cmd[2:]...)
		res, err = sc.call(ctx, c, cmd)
	}
	if err != nil {
		return nil, fmt.Errorf("run script %s: %w", sc.name, err)
	}
	vals, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("run script %s: unexpected reply %T", sc.name, res)
	}
	return vals, nil
}

func (sc *script) call(ctx context.Context, c rediser, args []any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	// Process's own error is the command's error, read below.
	_ = c.Process(ctx, noRetryCmd{cmd})
	return cmd.Result()
}

// noRetryCmd marks a command as never to be retried by go-redis.
type noRetryCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to resend the command after a network error.
func (noRetryCmd) NoRetry() bool { return true }

func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && redis.HasErrorPrefix(err, "NOSCRIPT")
}
