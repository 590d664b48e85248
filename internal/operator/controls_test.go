package operator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

func TestDecodeControlRequestIsStrict(t *testing.T) {
	good := `{"action":"scale","identity":"key:ab","duration":"1h","factor":10,"reason":"launch","by":"alice"}`
	req, err := DecodeControlRequest([]byte(good))
	if err != nil || req != (ControlRequest{Action: "scale", Identity: "key:ab", Duration: "1h", Factor: 10, Reason: "launch", By: "alice"}) {
		t.Fatalf("decode %s = %+v, %v", good, req, err)
	}
	for name, payload := range map[string]string{
		"unknown field":  `{"action":"list","extra":true}`,
		"trailing data":  `{"action":"list"}{}`,
		"trailing junk":  `{"action":"list"} x`,
		"not an object":  `["list"]`,
		"empty":          ``,
		"wrong type":     `{"action":1}`,
		"too big":        `{"action":"list","reason":"` + strings.Repeat("x", MaxControlRequest) + `"}`,
		"case folded":    `{"Action":"list"}`,
		"case twice":     `{"action":"list","ACTION":"block"}`,
		"duplicate keys": `{"action":"list","action":"block","identity":"ip:1.2.3.4"}`,
	} {
		if req, err := DecodeControlRequest([]byte(payload)); err == nil {
			t.Errorf("%s: decoded %+v, want a refusal", name, req)
		} else if !IsBadRequest(err) {
			t.Errorf("%s: %v, want a bad-request error", name, err)
		}
	}
}

func TestParseControlDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{"90m": 90 * time.Minute, "1h": time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour, "1s": time.Second} {
		if got, err := ParseControlDuration(s); err != nil || got != want {
			t.Errorf("ParseControlDuration(%q) = %s, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "0s", "-1h", "31d", "721h", "1.5d", "d", "0d", "1w", "forever"} {
		if _, err := ParseControlDuration(s); err == nil {
			t.Errorf("ParseControlDuration(%q) accepted", s)
		}
	}
}

func TestParseControlNetwork(t *testing.T) {
	for _, s := range []string{"203.0.113.0/24", "2001:db8::/48", "0.0.0.0/0"} {
		if p, err := ParseControlNetwork(s); err != nil || p.String() != s {
			t.Errorf("ParseControlNetwork(%q) = %s, %v", s, p, err)
		}
	}
	for _, s := range []string{"203.0.113.7/24", "203.0.113.7", "::ffff:203.0.113.0/120", "fe80::/64%eth0", "x/8", ""} {
		if _, err := ParseControlNetwork(s); err == nil {
			t.Errorf("ParseControlNetwork(%q) accepted", s)
		}
	}
}

// FuzzDecodeControlRequest: any payload gets a request or a clear
// refusal, never a panic, and a request it accepts re-encodes to one that
// decodes the same.
func FuzzDecodeControlRequest(f *testing.F) {
	f.Add([]byte(`{"action":"block","identity":"ip:203.0.113.7","duration":"1h","reason":"r","by":"b"}`))
	f.Add([]byte(`{"action":"list"}`))
	f.Add([]byte(`{"action":"scale","network":"10.0.0.0/8","factor":1e400}`))
	f.Add([]byte("{\"action\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		req, err := DecodeControlRequest(payload)
		if err != nil {
			if !IsBadRequest(err) || !utf8.ValidString(err.Error()) && utf8.Valid(payload) {
				t.Fatalf("refusal %v is not a clear bad-request error", err)
			}
			return
		}
		if len(payload) > MaxControlRequest {
			t.Fatalf("accepted %d bytes", len(payload))
		}
		_ = checkIdentity(req.Identity, 64)
		_, _ = ParseControlDuration(req.Duration)
		_, _ = ParseControlNetwork(req.Network)
	})
}

// TestFunctionRefusesIdentitiesNeverCounted (issue 37, hole 3): the
// operator function, invoked directly, acknowledges a control only on an
// identity exactly as the functions count it, on a real Redis; every other
// spelling of a caller is refused, before Redis is written, with the
// identity to send, and nothing is set.
func TestFunctionRefusesIdentitiesNeverCounted(t *testing.T) {
	srv := redistest.StartServer(t)
	env := map[string]string{"REDIS_URL": srv.URL()}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	f := NewFunction(cfg, Options{}, nil)
	t.Cleanup(func() { f.Close() })
	block := func(id string) (ControlReply, error) {
		payload, _ := json.Marshal(ControlRequest{Action: "block", Identity: id, Duration: "1h", Reason: "test", By: "test"})
		return f.Handle(context.Background(), payload)
	}
	hash := identity.KeyHash("some-key")
	for _, tc := range []struct{ id, send string }{
		{"ip:2001:db8:1:2::5", "ip:2001:db8:1:2::/64"},
		{"ip:2001:DB8:1:2::/64", "ip:2001:db8:1:2::/64"},
		{"ip:::ffff:203.0.113.7", "ip:203.0.113.7"},
		{"ip:2002:cb00:7107::1", "ip:203.0.113.7"},
		{"ip:203.0.113.9 ", "ip:203.0.113.9"},
		{"key:" + strings.ToUpper(hash), "key:" + hash},
		{"ip:2001:db8:1:2::/56", ""},
		{"ip:203.0.113.0/24", ""},
		{"key:abc", ""},
	} {
		reply, err := block(tc.id)
		if err == nil || !IsBadRequest(err) {
			t.Errorf("block %q: %+v, %v; want a refusal", tc.id, reply, err)
			continue
		}
		if tc.send != "" && !strings.Contains(err.Error(), `send "`+tc.send+`"`) {
			t.Errorf("block %q: %v; want it to say send %q", tc.id, err, tc.send)
		}
	}
	list, err := f.Handle(context.Background(), []byte(`{"action":"list"}`))
	if err != nil || len(list.Controls) != 0 {
		t.Fatalf("after the refusals: %+v, %v; want no control", list, err)
	}
	for _, id := range []string{"ip:2001:db8:1:2::/64", "ip:203.0.113.7", "key:" + hash, "sub:alice", "ip:invalid"} {
		if reply, err := block(id); err != nil || !reply.Found {
			t.Errorf("block %q: %+v, %v; want it set", id, reply, err)
		}
	}
}

// TestFunctionTakesTheIdentityTheLogsPrint (issue 41): the operator
// function sets a control on a caller named by its hash as the logs print
// it ("hash:" and the hex), on the keys of the identity hashed; the hash
// as printed alone, or in upper case, is refused with the form to send.
// The lift by the identity itself then finds that control.
func TestFunctionTakesTheIdentityTheLogsPrint(t *testing.T) {
	srv := redistest.StartServer(t)
	env := map[string]string{"REDIS_URL": srv.URL(), "RATE_LIMIT_HASH_KEY": "operator-test-identity-hash-key-0123456789"}
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	f := NewFunction(cfg, Options{}, nil)
	t.Cleanup(func() { f.Close() })
	hasher, err := identity.NewHasher([]byte(env["RATE_LIMIT_HASH_KEY"]))
	if err != nil {
		t.Fatal(err)
	}
	logged := hasher.Hash("ip:198.51.100.9")
	handle := func(req ControlRequest) (ControlReply, error) {
		payload, _ := json.Marshal(req)
		return f.Handle(context.Background(), payload)
	}
	for _, id := range []string{logged, "hash:" + strings.ToUpper(logged)} {
		if _, err := handle(ControlRequest{Action: "block", Identity: id, Duration: "1h", Reason: "r", By: "b"}); err == nil || !strings.Contains(err.Error(), `send "hash:`+logged+`"`) {
			t.Errorf("block %q: %v; want a refusal that says send hash:%s", id, err, logged)
		}
	}
	reply, err := handle(ControlRequest{Action: "block", Identity: "hash:" + logged, Duration: "1h", Reason: "from the logs", By: "b"})
	if err != nil || reply.Control == nil || reply.Control.Hash != logged {
		t.Fatalf("block hash:%s: %+v, %v; want it set and shown by that hash", logged, reply, err)
	}
	reply, err = handle(ControlRequest{Action: "lift", Identity: "ip:198.51.100.9", By: "b"})
	if err != nil || !reply.Found || reply.Control.Reason != "from the logs" {
		t.Fatalf("lift ip:198.51.100.9: %+v, %v; want the control set through its hash", reply, err)
	}
}
