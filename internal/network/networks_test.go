package network_test

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/network"
)

// parse parses a RATE_LIMIT_NETWORKS value split as the configuration
// splits it: at commas, each item trimmed, empty ones dropped.
func parse(s string) (network.Networks, error) {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return network.Parse(items)
}

// TestLookup: the most specific network wins, IPv4 and IPv6, mapped
// addresses read as IPv4.
func TestLookup(t *testing.T) {
	n, err := parse("10.0.0.0/8=unlimited, 10.9.0.0/16=blocked,192.0.2.7=partner,2001:db8::/32=Partner,::ffff:198.51.100.0/120=blocked")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ip, plan string }{
		{"10.1.2.3", "unlimited"},
		{"10.9.9.9", "blocked"},
		{"192.0.2.7", "partner"},
		{"192.0.2.8", ""},
		{"2001:db8:1::5", "partner"},
		{"2001:db9::1", ""},
		{"::ffff:10.1.2.3", "unlimited"},
		{"198.51.100.200", "blocked"},
		{"not an address", ""},
		{"", ""},
	} {
		plan, ok := n.Lookup(c.ip)
		if plan != c.plan || ok != (c.plan != "") {
			t.Errorf("Lookup(%q) = %q, %v; want %q", c.ip, plan, ok, c.plan)
		}
	}
}

// FuzzNetworks: parsing RATE_LIMIT_NETWORKS and looking up an address
// never panics, and an accepted network contains its own address.
func FuzzNetworks(f *testing.F) {
	f.Add("10.0.0.0/8=unlimited,192.0.2.0/24=blocked,198.51.100.0/24=partner", "10.1.2.3")
	f.Add("2001:db8::/32=partner,::/0=blocked", "2001:db8::1")
	f.Add("::ffff:10.0.0.0/104=unlimited", "::ffff:10.0.0.1")
	f.Add("1.2.3.4=x,=,/=", "1.2.3.4")
	f.Add("fe80::1%eth0/64=blocked", "fe80::1%eth0")
	f.Add("0.0.0.0/0=blocked,1.2.3.4/32=unlimited", "1.2.3.4")
	f.Fuzz(func(t *testing.T, spec, ip string) {
		n, err := parse(spec)
		if err != nil {
			return
		}
		_, _ = n.Lookup(ip)
		// Every network accepted holds its own first address.
		for _, entry := range strings.Split(n.String(), ",") {
			if entry == "" {
				continue
			}
			cidr, _, _ := strings.Cut(entry, "=")
			addr, _, _ := strings.Cut(cidr, "/")
			if _, ok := n.Lookup(addr); !ok {
				t.Fatalf("network.Parse(%q): %s not found in its own network", spec, addr)
			}
		}
	})
}

// TestHostBitsRefused: a CIDR with host bits set names its entry and
// fails the whole value.
func TestHostBitsRefused(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/0=unlimited", "10.1.2.3/8=blocked", "2001:db8::1/32=pro", "::ffff:10.0.0.1/104=unlimited"} {
		if _, err := parse(bad); err == nil || !strings.Contains(err.Error(), "host bits") {
			t.Errorf("network.Parse(%q): %v, want host bits refused", bad, err)
		}
	}
	if n, err := parse("10.0.0.0/8=unlimited,203.0.113.7=blocked,::ffff:10.0.0.0/104=pro"); err == nil || n.Len() != 0 {
		// ::ffff:10.0.0.0/104 is 10.0.0.0/8, given twice.
		t.Errorf("duplicate through the mapped form: %v", err)
	}
	if n, err := parse("10.0.0.0/8=unlimited,203.0.113.7=blocked,2001:db8::/32=pro"); err != nil || n.Len() != 3 {
		t.Errorf("clean networks: %v", err)
	}
}
