package policy_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// TestNetworkVerdictUnderLiveControls pins down how the live network
// controls join RATE_LIMIT_NETWORKS: blocked when either source blocks any
// form of the address, exempt (unlimited) only when a live exemption holds
// every form and neither source blocks one; the control that changed the
// verdict is reported, and none when the static verdict stands.
func TestNetworkVerdictUnderLiveControls(t *testing.T) {
	static, err := network.Parse(strings.Split("203.0.113.0/24=blocked,198.51.100.0/24=partner,10.0.0.0/8=unlimited", ","))
	if err != nil {
		t.Fatal(err)
	}
	soon, later := time.Now().Add(time.Minute), time.Now().Add(time.Hour)
	ctl := func(cidr string, kind controls.Kind, until time.Time) controls.Network {
		return controls.Network{Prefix: netip.MustParsePrefix(cidr), Control: controls.Control{Kind: kind, Until: until, Reason: "test"}}
	}
	block, exempt := controls.Block, controls.Exempt
	cases := []struct {
		name    string
		live    []controls.Network
		ip      string
		verdict string
		control controls.Kind
		until   time.Time
	}{
		{"no control: the static verdict", nil, "198.51.100.7", "partner", controls.None, time.Time{}},
		{"a live block", []controls.Network{ctl("192.0.2.0/24", block, later)}, "192.0.2.7", network.Blocked, block, later},
		{"a live block over a static plan", []controls.Network{ctl("198.51.100.0/25", block, soon)}, "198.51.100.7", network.Blocked, block, soon},
		{"a live block over a static unlimited network", []controls.Network{ctl("10.1.0.0/16", block, soon)}, "10.1.2.3", network.Blocked, block, soon},
		{"a narrower live exemption does not lift a live block",
			[]controls.Network{ctl("192.0.2.0/24", block, soon), ctl("192.0.2.0/28", exempt, later)}, "192.0.2.7", network.Blocked, block, soon},
		{"two live blocks: the later end", []controls.Network{ctl("192.0.2.0/24", block, soon), ctl("192.0.0.0/16", block, later)}, "192.0.2.7", network.Blocked, block, later},
		{"a live exemption of a static block: blocked, by RATE_LIMIT_NETWORKS",
			[]controls.Network{ctl("203.0.113.0/24", exempt, later)}, "203.0.113.9", network.Blocked, controls.None, time.Time{}},
		{"a live block of a static block: RATE_LIMIT_NETWORKS's", []controls.Network{ctl("203.0.113.0/24", block, later)}, "203.0.113.9", network.Blocked, controls.None, time.Time{}},
		{"a live exemption", []controls.Network{ctl("192.0.2.0/24", exempt, later)}, "192.0.2.7", network.Unlimited, exempt, later},
		{"a live exemption over a static plan", []controls.Network{ctl("198.51.100.0/24", exempt, later)}, "198.51.100.7", network.Unlimited, exempt, later},
		{"a live exemption of a static unlimited network changes nothing", []controls.Network{ctl("10.0.0.0/8", exempt, later)}, "10.1.2.3", network.Unlimited, controls.None, time.Time{}},
		{"a live exemption elsewhere", []controls.Network{ctl("192.0.2.0/24", exempt, later)}, "192.0.3.7", "", controls.None, time.Time{}},
		// 2002:c000:0207::1 is the 6to4 address of 192.0.2.7.
		{"6to4: a live block of the IPv4 form", []controls.Network{ctl("192.0.2.0/24", block, later)}, "2002:c000:0207::1", network.Blocked, block, later},
		{"6to4: a live block of the IPv6 form", []controls.Network{ctl("2002::/16", block, later)}, "2002:c000:0207::1", network.Blocked, block, later},
		{"6to4: an exemption of one form only", []controls.Network{ctl("192.0.2.0/24", exempt, later)}, "2002:c000:0207::1", "", controls.None, time.Time{}},
		{"6to4: exemptions of both forms, until the first ends",
			[]controls.Network{ctl("192.0.2.0/24", exempt, later), ctl("2002::/16", exempt, soon)}, "2002:c000:0207::1", network.Unlimited, exempt, soon},
		{"6to4: an exemption of one form, a block of the other",
			[]controls.Network{ctl("2002::/16", exempt, later), ctl("192.0.2.0/24", block, soon)}, "2002:c000:0207::1", network.Blocked, block, soon},
		{"6to4: an exemption of both forms, one statically blocked", []controls.Network{ctl("2002::/16", exempt, later), ctl("203.0.113.0/24", exempt, later)},
			"2002:cb00:7107::1", network.Blocked, controls.None, time.Time{}},
		{"mapped IPv4 is IPv4", []controls.Network{ctl("192.0.2.0/24", block, later)}, "::ffff:192.0.2.7", network.Blocked, block, later},
		{"an address that does not parse", []controls.Network{ctl("0.0.0.0/0", block, later)}, "test-invoke-source-ip", "", controls.None, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			read := network.Read(static, c.live, c.ip)
			verdict, got := read.String(), read.Control
			if verdict != c.verdict || got.Kind != c.control || !got.Until.Equal(c.until) {
				t.Errorf("network.Read(%s) = %q, %s until %v; want %q, %s until %v", c.ip, verdict, got.Kind, got.Until, c.verdict, c.control, c.until)
			}
			// The one place: Stage.CallerRules reads the same, and the
			// network's answer carries the control.
			s := policy.Stage{Limits: &config.Limits{Networks: static}, NetworkControls: c.live}
			caller := s.CallerRules(identity.Caller{Tier: identity.TierAnonymous, Identity: "ip:x"}, c.ip)
			if caller.Network.String() != c.verdict || caller.Network.Control.Kind != c.control {
				t.Errorf("Stage.CallerRules: network %q control %s, want %q %s", caller.Network.String(), caller.Network.Control.Kind, c.verdict, c.control)
			}
			d, ok := caller.Network.Decided(false)
			kind, res := httplimit.KindOf(d), d.Result
			switch c.verdict {
			case network.Blocked:
				if !ok || kind != apigw.Blocked || res.Control.Kind != c.control {
					t.Errorf("Network.Decided: %v %+v %v, want Blocked with the control", kind, res, ok)
				}
			case network.Unlimited:
				if !ok || kind != apigw.Unlimited || !res.Allowed || res.Control.Kind != c.control {
					t.Errorf("Network.Decided: %v %+v %v, want Unlimited with the control", kind, res, ok)
				}
				if d, _ := caller.Network.Decided(true); httplimit.KindOf(d) != apigw.Unauthorized {
					t.Errorf("a bad credential under a live exemption: %v, want Unauthorized (an exemption is not authentication)", kind)
				}
			}
		})
	}
}
