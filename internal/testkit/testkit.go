// Package testkit holds the helpers that tests across the module share: a
// clock that tests move by hand, a buffer that several goroutines may
// write at once, and the most times in any rolling window (what a rate
// limit bounds). Its subpackages start real Redis servers (redistest), run
// built functions under the Lambda emulator (lambdatest), run moto_server
// for the AWS calls (mototest), put faults between a client and a server
// (faultproxy) and hold a call until a test lets it go (holdgate). Tool says
// plainly when an outside tool such as cfn-lint or moto_server is missing.
//
// Everything under internal/testkit is test support: no code that ships
// imports it.
package testkit

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Clock is an injected clock that moves only when a test moves it. It is
// safe for concurrent use, so background work may read it while a test
// steps it. Pass its Now method where code takes a func() time.Time.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock standing at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d (back, if d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Buffer is a bytes.Buffer that several goroutines may write at once, such
// as a log written by concurrent requests. Its zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// MaxInRollingWindow is the largest number of times within any half-open
// span [t, t+window): what a rate limit promises to bound.
func MaxInRollingWindow(times []time.Time, window time.Duration) int {
	sorted := slices.Clone(times)
	slices.SortFunc(sorted, time.Time.Compare)
	best, lo := 0, 0
	for hi := range sorted {
		for sorted[hi].Sub(sorted[lo]) >= window {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// IdentityDigest is the 128 bits of an identity's HMAC-SHA-256 with key, or
// of its SHA-256 with no key: the hash that names a caller in Redis keys
// and logs, computed here independently of the code that computes it.
func IdentityDigest(key, id string) []byte {
	if key == "" {
		sum := sha256.Sum256([]byte(id))
		return sum[:16]
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(id))
	return mac.Sum(nil)[:16]
}

// RandomSecret is 48 random hex digits: a secret (an HS256 key, a Redis
// password) that no other test shares.
func RandomSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// BudgetSlack is how far past its Redis budget a decision may run before a
// test fails. The contract (docs/contract.md) promises the budget plus the
// time to notice it has passed; tests allow far more so that a noisy shared
// machine does not make them flaky (357 ms was seen at a load average of
// 14 on 2 cores), and log the measured worst case instead: what they pin
// down is that a hanging Redis never holds a decision for long.
const BudgetSlack = 400 * time.Millisecond

// LineWith reports whether one line of s holds every one of parts.
func LineWith(s string, parts ...string) bool {
	for _, line := range strings.Split(s, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
