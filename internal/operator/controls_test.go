package operator

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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
		_ = checkIdentity(req.Identity)
		_, _ = ParseControlDuration(req.Duration)
		_, _ = ParseControlNetwork(req.Network)
	})
}
