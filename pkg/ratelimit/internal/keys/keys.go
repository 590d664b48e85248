// Package keys holds the key rules package ratelimit and package controls
// share: the key prefix's rule, an identity's hash tag, and the names of the
// live controls' keys. Both packages build their keys here, so that a
// control set through one is the control the other's decisions read.
package keys

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// DefaultPrefix starts every Redis key unless Options.KeyPrefix says
// otherwise.
const DefaultPrefix = "rl"

// HashedIdentityPrefix starts an identity given as its hash
// (Options.HashedIdentities).
const HashedIdentityPrefix = "hash:"

// TagLen is the length of an identity's tag: 16 bytes in unpadded base64.
const TagLen = (16*8 + 5) / 6

// Space is one Limiter's key space: its prefix, its identity hash key
// (Options.IdentityHashKey) and whether it reads hashed identities
// (Options.HashedIdentities).
type Space struct {
	Prefix  string
	HashKey []byte
	Hashed  bool
}

// Digest is the hash of an identity whose first 16 bytes make its tag:
// IdentityDigest, or, when Hashed, the 16 bytes an identity given as its
// hash ("hash:" and 32 lower-case hex digits) spells.
func (k Space) Digest(identity string) [sha256.Size]byte {
	if k.Hashed {
		if h, ok := strings.CutPrefix(identity, HashedIdentityPrefix); ok && len(h) == 32 && strings.ToLower(h) == h {
			var sum [sha256.Size]byte
			if _, err := hex.Decode(sum[:16], []byte(h)); err == nil {
				return sum
			}
		}
	}
	return IdentityDigest(k.HashKey, identity)
}

// Tag is the hash tag of an identity: 128 bits of its SHA-256 (or
// HMAC-SHA-256), unpadded base64url, 22 characters that never contain a
// brace. Whatever bytes the identity holds, it cannot choose its slot.
func (k Space) Tag(identity string) string {
	sum := k.Digest(identity)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// WithSuffix joins the prefix, the tag (as the cluster hash tag) and a
// suffix.
func (k Space) WithSuffix(tag, suffix string) string {
	var b strings.Builder
	b.Grow(len(k.Prefix) + len(tag) + len(suffix) + 3)
	b.WriteString(k.Prefix)
	b.WriteString(":{")
	b.WriteString(tag)
	b.WriteByte('}')
	b.WriteString(suffix)
	return b.String()
}

// ControlKey is the key of an identity's live control, in the identity's
// hash slot so that its decision script reads it atomically. Limit keys'
// suffixes start with an algorithm code and never end at ":ctl", so no
// limit can name it.
func (k Space) ControlKey(tag string) string { return k.WithSuffix(tag, ":ctl") }

// ControlIndexKey is the sorted set listing the tags of identities that
// hold a control, scored by the control's end in Unix milliseconds: the
// one place that can list controls spread over every slot. It carries no
// hash tag; only the admin calls touch it.
func (k Space) ControlIndexKey() string { return k.Prefix + ":controls" }

// NetworkControlsKey is the hash of network controls: one field per
// network (its canonical CIDR), each a control record, and the fields
// mirroring identity controls. Every instance reads it, at most once per
// controls.Propagation.
func (k Space) NetworkControlsKey() string { return k.Prefix + ":netcontrols" }

// IdentityDigest is an identity's HMAC-SHA-256 with hashKey, or its
// SHA-256 when hashKey is empty.
func IdentityDigest(hashKey []byte, identity string) [sha256.Size]byte {
	var sum [sha256.Size]byte
	if len(hashKey) > 0 {
		h := hmac.New(sha256.New, hashKey)
		h.Write([]byte(identity))
		h.Sum(sum[:0])
	} else {
		sum = sha256.Sum256([]byte(identity))
	}
	return sum
}

// ValidatePrefix rejects a prefix that could move the hash tag.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("key prefix is empty")
	}
	if strings.ContainsAny(prefix, "{}") || len(prefix) > 64 {
		shown := prefix
		if len(shown) > 64 {
			shown = shown[:64] + "..."
		}
		return fmt.Errorf("key prefix %q: at most 64 characters, without '{' or '}'", shown)
	}
	return nil
}
