package faultproxy

import "testing"

// StartTest puts a proxy in front of target for the test t, closed when t
// ends; a proxy that cannot start fails t.
func StartTest(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatalf("start fault proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// SetModeTest switches the proxy's mode, failing t when it cannot.
func (p *Proxy) SetModeTest(t testing.TB, m Mode) {
	t.Helper()
	if err := p.SetMode(m); err != nil {
		t.Fatalf("proxy mode %s: %v", m, err)
	}
}
