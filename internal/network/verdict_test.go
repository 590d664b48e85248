package network_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// BenchmarkReadNetwork is the request path's cost of the live network
// controls: the verdict on an address under none of them, with 0, 10 and
// the most (controls.MaxNetworks) in force, beside
// RATE_LIMIT_NETWORKS's ten entries.
//
//	go test ./internal/network/ -run '^$' -bench ReadNetwork
func BenchmarkReadNetwork(b *testing.B) {
	static, err := network.Parse(strings.Split("10.0.0.0/8=unlimited,192.0.2.0/24=blocked,198.51.100.0/24=partner,2001:db8::/32=unlimited,10.66.0.0/16=blocked,172.16.0.0/12=partner,100.64.0.0/10=blocked,2001:db8:bad::/48=blocked,203.0.113.128/25=blocked,198.18.0.0/15=unlimited", ","))
	if err != nil {
		b.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	for _, n := range []int{0, 10, controls.MaxNetworks} {
		live := make([]controls.Network, n)
		for i := range live {
			kind := controls.Block
			if i%2 == 1 {
				kind = controls.Exempt
			}
			live[i] = controls.Network{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24), Control: controls.Control{Kind: kind, Until: until}}
		}
		b.Run(fmt.Sprintf("live=%d", n), func(b *testing.B) {
			for b.Loop() {
				if v := network.Read(static, live, "203.0.113.7").String(); v != "" {
					b.Fatal(v)
				}
			}
		})
	}
}
