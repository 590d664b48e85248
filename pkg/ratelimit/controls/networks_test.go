package controls

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/ctlstore"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 10, 0, time.UTC)

// TestNetworksOfSkipsIdentityFields: the "i:<tag>" fields are identities
// (the watch's, ctlstore's test), not malformed networks; a field that is
// no network is counted malformed, with the identity fields the watch
// could not read.
func TestNetworksOfSkipsIdentityFields(t *testing.T) {
	now := t0
	us := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMicro(), 10) }
	fields := map[string]string{
		"i:live":         us(time.Hour),
		"i:ended":        us(-time.Second),
		"i:now":          us(0),
		"i:garbage":      "soon",
		"i:":             us(time.Hour),
		"203.0.113.0/24": formatRecord(Control{Kind: Block, Until: now.Add(time.Hour), Reason: "r"}),
		"not-a-network":  "v1 b 1 0 {}",
	}
	list, malformed := networksOf(ctlstore.ReadFields(fields, now))
	if len(list) != 1 || list[0].Prefix.String() != "203.0.113.0/24" {
		t.Fatalf("networks %+v", list)
	}
	// "i:garbage", "i:" and "not-a-network".
	if malformed != 3 {
		t.Fatalf("%d malformed, want 3", malformed)
	}
	if _, err := keepNetworks(list, malformed); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "3 field(s) skipped") {
		t.Fatalf("keepNetworks: %v, want 3 fields skipped", err)
	}
}

// FuzzNetworksOf: any field and value read without a panic; every field
// is a network, a watched identity, ended or malformed (an identity field
// with an unreadable end is both watched and malformed).
func FuzzNetworksOf(f *testing.F) {
	f.Add("i:tag", "1900000000000000")
	f.Add("i:", "")
	f.Add("10.0.0.0/8", "v1 b 1900000000000000 0 {}")
	f.Add("i:x", "99999999999999999")
	f.Add("i:*", "1900000000000000")
	f.Fuzz(func(t *testing.T, field, value string) {
		st := ctlstore.ReadFields(map[string]string{field: value}, t0)
		list, malformed := networksOf(st)
		if len(list)+st.Identities > 1 || len(list)+malformed > 1 {
			t.Fatalf("%q=%q: %d networks, %d identities, %d malformed", field, value, len(list), st.Identities, malformed)
		}
		if len(list) == 1 && strings.HasPrefix(field, "i:") {
			t.Fatalf("%q read as a network", field)
		}
	})
}
