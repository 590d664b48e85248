package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// BenchmarkDecisionControls measures one decision (one EVALSHA round trip
// on a local redis-server) with live controls off, on with no record (the
// default path), and on with each kind of control set, for the sliding
// window and the token bucket, over 1,000 identities. Compare the lines of
// one run side by side:
//
//	go test ./pkg/ratelimit -run '^$' -bench BenchmarkDecisionControls -benchmem
//
// The Redis time alone, without the round trip, is what redis-benchmark
// and INFO commandstats measure (docs/design.md, "Live controls").
func BenchmarkDecisionControls(b *testing.B) {
	client := redistest.StartServer(b).Client(b)
	ctx := context.Background()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "bench-user-" + strconv.Itoa(i)
	}
	until := time.Now().Add(time.Hour)
	records := []struct {
		name   string
		record string
	}{
		{"on/no-record", ""},
		{"on/malformed", "v1 q 1 0 {}"},
		{"on/block", formatControlRecord(Control{Kind: ControlBlock, Until: until, Reason: "bench"})},
		{"on/exempt", formatControlRecord(Control{Kind: ControlExempt, Until: until, Reason: "bench"})},
		{"on/scale-x2", formatControlRecord(Control{Kind: ControlScale, Factor: 2, Until: until, Reason: "bench"})},
	}
	for _, alg := range []Algorithm{SlidingWindow, TokenBucket} {
		// A limit no run can exhaust, even halved: every decision is a
		// full admit-and-write.
		lim := Limit{Name: "user", Count: 100_000, Window: 15 * time.Minute, Algorithm: alg}
		run := func(b *testing.B, l *Limiter) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := l.Allow(ctx, ids[i%len(ids)], lim); err != nil {
					b.Fatal(err)
				}
				i++
			}
		}
		b.Run(string(alg)+"/off", func(b *testing.B) {
			run(b, loadedLimiter(b, client, Options{KeyPrefix: "bench-off"}))
		})
		for _, r := range records {
			prefix := "bench-" + r.name
			l := loadedLimiter(b, client, Options{KeyPrefix: prefix, Controls: true})
			if r.record != "" {
				for _, id := range ids {
					if err := client.Set(ctx, l.keys.controlKey(l.keys.identityTag(id)), r.record, time.Hour).Err(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.Run(string(alg)+"/"+r.name, func(b *testing.B) { run(b, l) })
		}
	}
}
