package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// BenchmarkDecisionControls measures one decision (one EVALSHA round trip
// on a local redis-server) with live controls off; on with no control
// anywhere and with controls on 1,000 other identities (the default path:
// the plain script, as the watch lists none of the callers); on with every
// caller watched but no record (the controlled script's floor: one GET
// more); and on with each kind of control set, for the sliding window and
// the token bucket, over 1,000 identities. Compare the lines of one run
// side by side:
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
	others := make([]string, len(ids))
	for i := range others {
		others[i] = "bench-other-" + strconv.Itoa(i)
	}
	records := []struct {
		name    string
		record  string
		watched []string // identities listed in the watch
	}{
		{"on/none", "", nil},
		{"on/others", "", others},
		{"on/watched-no-record", "", ids},
		{"on/malformed", "v1 q 1 0 {}", ids},
		{"on/block", formatControlRecord(controls.Control{Kind: controls.Block, Until: until, Reason: "bench"}), ids},
		{"on/exempt", formatControlRecord(controls.Control{Kind: controls.Exempt, Until: until, Reason: "bench"}), ids},
		{"on/scale-x2", formatControlRecord(controls.Control{Kind: controls.Scale, Factor: 2, Until: until, Reason: "bench"}), ids},
	}
	for _, alg := range []Algorithm{SlidingWindow, TokenBucket} {
		// A limit no run can exhaust, even halved: every decision is a
		// full admit-and-write.
		lim := Limit{Name: "user", Count: 100_000, Window: 15 * time.Minute, Algorithm: alg}
		run := func(b *testing.B, l *Limiter) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := l.allow(ctx, ids[i%len(ids)], lim); err != nil {
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
			for _, id := range r.watched {
				watchIdentity(b, client, l, id)
			}
			b.Run(string(alg)+"/"+r.name, func(b *testing.B) { run(b, l) })
		}
	}
}
