package httplimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Limit returns net/http middleware that limits every request to limit per
// caller, through gate (ratelimit.New): opts.Key names the caller,
// ClientIP() when nil. A request within the limit reaches the handler with
// the rate-limit headers set; one beyond it is answered 429 with the
// headers, Retry-After and the JSON body of package contract, and the handler
// is not called. The Gate fails open: while Redis cannot decide, its local
// fallback does, and the answers carry contract.HeaderDegraded. The answers
// are Middleware's.
//
// Behind slidegate's HTTP API authorizer with HttpApiDenials=forward, set
// opts.Authorizer: a request whose authorizer context describes a decision
// (FromAuthorizerContext) is answered from it, a denial with the same 429
// and headers, and nothing is spent again; a fail-closed request the
// authorizer could not decide is a 503. Any other request is decided here.
func Limit(gate *ratelimit.Gate, limit ratelimit.Limit, opts Options) func(http.Handler) http.Handler {
	key := opts.Key
	if key == nil {
		key = ClientIP()
	}
	return Middleware(func(r *http.Request) (Outcome, error) {
		if opts.Authorizer != nil {
			if out, ok := FromAuthorizerContext(opts.Authorizer(r)); ok {
				if out.Kind == Unavailable {
					return out, ErrAuthorizerUnavailable
				}
				return out, nil
			}
		}
		res, err := gate.Allow(r.Context(), key(r), limit)
		return Outcome{Kind: KindOf(Decided{Result: res, Err: err}), Result: res}, err
	}, opts)
}

// ErrAuthorizerUnavailable is the error of a request that slidegate's HTTP
// API authorizer could not decide on a fail-closed route (its context says
// contract.CtxUnavailable): the middleware answers it 503, as a Redis outage
// it saw itself.
var ErrAuthorizerUnavailable = fmt.Errorf("the authorizer could not decide this fail-closed request: %w", ratelimit.ErrUnavailable)

// ClientIP returns a key function naming a request's caller by its source
// address: the peer of the connection (http.Request.RemoteAddr), an IPv6
// address by its /64 (one subscriber's usual allocation, which it can walk
// through at will).
//
// X-Forwarded-For is read only when the peer is one of the trusted
// proxies: then the caller is the rightmost address of the header that is
// not itself a trusted proxy (what the last trusted proxy saw), the peer
// when there is none. Whatever a client writes to the left of that is never
// read: a client chooses it. With no trusted proxies the header is never
// read. An address that does not parse is used as it is, so that it still
// counts against someone.
func ClientIP(trusted ...netip.Prefix) func(*http.Request) string {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		peer, ok := parseAddr(r.RemoteAddr)
		if !ok {
			return r.RemoteAddr
		}
		if len(trusted) == 0 || !isTrusted(peer) {
			return addrKey(peer)
		}
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				// A hop that does not parse ends the chain the trusted
				// proxies vouch for: the last trusted hop is the caller.
				break
			}
			a = a.Unmap()
			if !isTrusted(a) {
				return addrKey(a)
			}
			peer = a
		}
		return addrKey(peer)
	}
}

// parseAddr reads a RemoteAddr ("192.0.2.1:1234", "[2001:db8::1]:80", or a
// bare address).
func parseAddr(s string) (netip.Addr, bool) {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// addrKey is an address as a key: an IPv4 address itself, an IPv6 address
// its /64.
func addrKey(a netip.Addr) string {
	if a.Is4() {
		return a.String()
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return a.String()
	}
	return p.String()
}
