package ratelimit

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// hashTag returns what Redis Cluster hashes for a key: the text between the
// first '{' and the first '}' after it, when that is non-empty.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

func TestKeysCarryOnlyTheIdentityHashAsTag(t *testing.T) {
	ks := keyspace{prefix: "rl"}
	limit := Limit{Name: "anonymous", Count: 30, Window: time.Minute}
	hostile := []string{
		"203.0.113.7",
		"{victim}",
		"}{",
		"a{b}c",
		"line\nbreak\r\n",
		string([]byte{0xff, 0xfe, 0x00, '{', 0x80}),
		strings.Repeat("{x}", 21846),
		strings.Repeat("\x00", 64<<10),
		"",
	}
	for _, id := range hostile {
		tag := ks.identityTag(id)
		key := ks.key(tag, limit)
		if got := hashTag(key); got != tag {
			t.Errorf("identity %q: key %q hashes on %q, want the identity hash %q", truncate(id, 20), key, got, tag)
		}
		if len(tag) != 22 || strings.ContainsAny(tag, "{}:\r\n ") {
			t.Errorf("identity %q: tag %q is not 22 safe characters", truncate(id, 20), tag)
		}
		if strings.Contains(key, id) && id != "" {
			t.Errorf("identity %q appears in clear in key %q", truncate(id, 20), key)
		}
		if !utf8.ValidString(key) || len(key) > 120 {
			t.Errorf("key %q is not short valid text", key)
		}
	}
}

func TestLimitsOfOneIdentityShareASlotAndNeverAKey(t *testing.T) {
	ks := keyspace{prefix: "rl"}
	tag := ks.identityTag("user-42")
	limits := []Limit{
		{Name: "user", Count: 600, Window: time.Minute},
		{Name: "POST /auth/*", Count: 5, Window: time.Minute},
		{Name: "POST /auth/?", Count: 5, Window: time.Minute},
		{Name: "user", Count: 600, Window: time.Hour},
		{Name: "user", Count: 600, Window: time.Minute, Algorithm: TokenBucket},
	}
	seen := map[string]Limit{}
	for _, l := range limits {
		key := ks.key(tag, l)
		if hashTag(key) != tag {
			t.Errorf("limit %+v: key %q left the identity's slot", l, key)
		}
		if other, dup := seen[key]; dup {
			t.Errorf("limits %+v and %+v share key %q", l, other, key)
		}
		seen[key] = l
	}
	// The count is not part of the key (issue 38): a limit whose count
	// changed counts on the same key.
	if a, b := ks.key(tag, limits[0]), ks.key(tag, Limit{Name: "user", Count: 601, Window: time.Minute}); a != b {
		t.Errorf("601/1m and 600/1m: keys %q and %q, want one", a, b)
	}
}

func TestIdentityHashKeyChangesTags(t *testing.T) {
	plain := keyspace{prefix: "rl"}.identityTag("198.51.100.1")
	keyed := keyspace{prefix: "rl", hashKey: []byte("secret")}.identityTag("198.51.100.1")
	if plain == keyed {
		t.Fatal("HMAC key did not change the identity hash")
	}
	if plain != (keyspace{prefix: "other"}).identityTag("198.51.100.1") {
		t.Fatal("identity hash is not stable")
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, ok := range []string{"rl", "slidegate-prod", "a:b"} {
		if err := validatePrefix(ok); err != nil {
			t.Errorf("validatePrefix(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "{rl}", "r}", strings.Repeat("x", 65)} {
		if err := validatePrefix(bad); err == nil {
			t.Errorf("validatePrefix(%q) accepted", bad)
		}
	}
}

// TestKeyLayouts pins down the key of every algorithm: no count in it
// (issue 38), so that a count changed keeps the caller's state.
func TestKeyLayouts(t *testing.T) {
	ks := keyspace{prefix: "rl"}
	tag := ks.identityTag("user-42")
	tests := []struct {
		lim Limit
		key string
	}{
		{Limit{Name: "user", Count: 30, Window: time.Minute}, "rl:{" + tag + "}:sw:user:1m"},
		{Limit{Name: "user", Count: 5, Window: 1500 * time.Millisecond, Algorithm: FixedWindow}, "rl:{" + tag + "}:fw:user:1500ms"},
		{Limit{Name: "user", Count: 30, Window: time.Hour, Algorithm: TokenBucket}, "rl:{" + tag + "}:tb:user:1h"},
		{Limit{Name: "user", Count: 3, Window: time.Hour, Algorithm: TokenBucket}, "rl:{" + tag + "}:tb:user:1h"},
	}
	for _, tt := range tests {
		if got := ks.key(tag, tt.lim); got != tt.key {
			t.Errorf("key(%v) = %q, want %q", tt.lim, got, tt.key)
		}
		if got := ks.keyForIdentity("user-42", keySuffix(tt.lim)); got != tt.key {
			t.Errorf("keyForIdentity(%v) = %q, want %q", tt.lim, got, tt.key)
		}
	}
}

// TestHashedIdentities: under Options.HashedIdentities an identity given
// as its hash ("hash:" and the 32 hex digits of its tag's 128 bits) names
// the same keys as the identity; any other spelling, and any limiter
// without the option, hashes it as an ordinary identity.
func TestHashedIdentities(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	id := "ip:203.0.113.7"
	sum := identityDigest(key, id)
	h := hex.EncodeToString(sum[:16])
	operator := keyspace{prefix: "rl", hashKey: key, hashed: true}
	deciding := keyspace{prefix: "rl", hashKey: key}
	for _, tc := range []struct {
		name     string
		ks       keyspace
		identity string
		same     bool
	}{
		{"the hash, under the option", operator, "hash:" + h, true},
		{"the identity itself, under the option", operator, id, true},
		{"upper case is another spelling", operator, "hash:" + strings.ToUpper(h), false},
		{"without the prefix", operator, h, false},
		{"one digit short", operator, "hash:" + h[:31], false},
		{"not hex", operator, "hash:" + h[:31] + "g", false},
		{"a limiter deciding requests", deciding, "hash:" + h, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			same := tc.ks.identityTag(tc.identity) == deciding.identityTag(id) &&
				tc.ks.keyForIdentity(tc.identity, ":x") == deciding.keyForIdentity(id, ":x")
			if same != tc.same {
				t.Errorf("%q names the keys of %q: %v, want %v", tc.identity, id, same, tc.same)
			}
		})
	}
}
