package instance

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// BenchmarkLiveNetworks is what the live network controls cost a request
// that does not read them (the list is fresh): the process cache's copy of
// the list and the network verdict, with 0, 10 and the most
// (controls.MaxNetworks) in force on a real redis-server.
//
//	go test ./internal/instance/ -run '^$' -bench LiveNetworks
func BenchmarkLiveNetworks(b *testing.B) {
	srv := redistest.StartServer(b)
	static, err := network.Parse(strings.Split("10.0.0.0/8=unlimited,192.0.2.0/24=blocked", ","))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []int{0, 10, controls.MaxNetworks} {
		limiter, err := ratelimit.NewLimiter(srv.Client(b), ratelimit.Options{KeyPrefix: fmt.Sprintf("bench%d", n), Timeout: 2 * time.Second, Controls: true})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24)
			c := controls.Control{Kind: controls.Block, Until: time.Now().Add(time.Hour), Reason: "bench"}
			if err := limiter.Controls().SetNetwork(ctx, p, c); err != nil {
				b.Fatal(err)
			}
		}
		// An interval no run reaches: every Get answers from memory.
		cache := controls.NewNetworkControlCache(limiter.Controls(), time.Hour)
		if list, err := cache.Get(ctx); err != nil || len(list) != n {
			b.Fatalf("%d controls read, %v; want %d", len(list), err, n)
		}
		b.Run(fmt.Sprintf("live=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				list, _ := cache.Get(ctx)
				if v := network.Read(static, list, "203.0.113.7").String(); v != "" {
					b.Fatal(v)
				}
			}
		})
	}
}
