package ratelimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// defaultKeyPrefix starts every Redis key unless Options.KeyPrefix says
// otherwise.
const defaultKeyPrefix = "rl"

// keyspace builds Redis keys. A key looks like
//
//	rl:{Zq3v0Yg1cF8b9y2Xw4uT7Q}:sw:anonymous:1m
//
// prefix, the identity's hash as the cluster hash tag, the algorithm, the
// policy name, then the window as in the configuration ("1m", "10s",
// "250ms"). The count is not part of the key: every algorithm stores what
// was spent in a form that means the same whatever the count (see each
// script's header), and the count is applied when deciding. Changing a
// limit's count (configuration, plan, a scale control) keeps every
// caller's counts; changing its window or algorithm names another key and
// starts its callers afresh.
type keyspace struct {
	prefix  string
	hashKey []byte
	// hashed: Options.HashedIdentities.
	hashed bool
}

// hashedIdentityPrefix starts an identity given as its hash
// (Options.HashedIdentities).
const hashedIdentityPrefix = "hash:"

// digest is the hash of an identity whose first 16 bytes make its tag:
// identityDigest, or, under Options.HashedIdentities, the 16 bytes an
// identity given as its hash spells.
func (k keyspace) digest(identity string) [sha256.Size]byte {
	if k.hashed {
		if h, ok := strings.CutPrefix(identity, hashedIdentityPrefix); ok && len(h) == 32 && strings.ToLower(h) == h {
			var sum [sha256.Size]byte
			if _, err := hex.Decode(sum[:16], []byte(h)); err == nil {
				return sum
			}
		}
	}
	return identityDigest(k.hashKey, identity)
}

// validatePrefix rejects a prefix that could move the hash tag.
func validatePrefix(prefix string) error {
	if prefix == "" {
		return fmt.Errorf("key prefix is empty")
	}
	if strings.ContainsAny(prefix, "{}") || len(prefix) > 64 {
		return fmt.Errorf("key prefix %q: at most 64 characters, without '{' or '}'", truncate(prefix, 64))
	}
	return nil
}

// identityTag is the hash tag of an identity: 128 bits of its SHA-256 (or
// HMAC-SHA-256), unpadded base64url, 22 characters that never contain a
// brace. Whatever bytes the identity holds, it cannot choose its slot.
func (k keyspace) identityTag(identity string) string {
	sum := k.digest(identity)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// identityDigest is an identity's HMAC-SHA-256 with hashKey, or its
// SHA-256 when hashKey is empty.
func identityDigest(hashKey []byte, identity string) [sha256.Size]byte {
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

// key returns the Redis key of one limit for an identity's tag.
func (k keyspace) key(tag string, l Limit) string {
	return k.keyWithSuffix(tag, keySuffix(l))
}

// keyWithSuffix joins the prefix, the tag and a suffix from keySuffix.
func (k keyspace) keyWithSuffix(tag, suffix string) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + len(tag) + len(suffix) + 3)
	b.WriteString(k.prefix)
	b.WriteString(":{")
	b.WriteString(tag)
	b.WriteByte('}')
	b.WriteString(suffix)
	return b.String()
}

// keyForIdentity is key for an identity not yet hashed: the tag is encoded
// straight into the key, with one allocation in all.
func (k keyspace) keyForIdentity(identity, suffix string) string {
	sum := k.digest(identity)
	var tag [tagLen]byte
	base64.RawURLEncoding.Encode(tag[:], sum[:16])
	var b strings.Builder
	b.Grow(len(k.prefix) + tagLen + len(suffix) + 3)
	b.WriteString(k.prefix)
	b.WriteString(":{")
	b.Write(tag[:])
	b.WriteByte('}')
	b.WriteString(suffix)
	return b.String()
}

// tagLen is the length of an identity's tag: 16 bytes in unpadded base64.
const tagLen = (16*8 + 5) / 6

// keySuffix is everything after the hash tag: the algorithm, the policy
// name and the window (see keyspace).
func keySuffix(l Limit) string {
	var b strings.Builder
	b.Grow(len(l.Name) + 16)
	b.WriteByte(':')
	b.WriteString(algorithmCode(l.Algorithm))
	b.WriteByte(':')
	b.WriteString(keySafeName(l.Name))
	b.WriteByte(':')
	b.WriteString(formatWindow(l.Window))
	return b.String()
}

// algorithmCode is the short form of an algorithm inside keys.
func algorithmCode(a Algorithm) string {
	switch a.orDefault() {
	case SlidingLog:
		return "sl"
	case TokenBucket:
		return "tb"
	case LeakyBucket:
		return "lb"
	case FixedWindow:
		return "fw"
	case SlidingBuckets:
		return "sb"
	default:
		return "sw"
	}
}

// keySafeName keeps a policy name readable in keys while making sure it
// cannot contain a brace or whitespace. Names that had to change get a short
// hash of the original, so two different names never share a key.
func keySafeName(name string) string {
	safe := true
	for i := 0; i < len(name); i++ {
		if !isKeySafe(name[i]) {
			safe = false
			break
		}
	}
	if safe && name != "" && len(name) <= 64 {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name) && b.Len() < 48; i++ {
		c := name[i]
		if isKeySafe(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(name))
	b.WriteByte('~')
	b.WriteString(base64.RawURLEncoding.EncodeToString(sum[:6]))
	return b.String()
}

func isKeySafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// controlKey is the key of an identity's live control (control.go), in the
// identity's hash slot so that its decision script reads it atomically.
// Limit keys' suffixes start with an algorithm code and never end at
// ":ctl", so no limit can name it.
func (k keyspace) controlKey(tag string) string { return k.keyWithSuffix(tag, ":ctl") }

// controlIndexKey is the sorted set listing the tags of identities that
// hold a control, scored by the control's end in Unix milliseconds: the
// one place that can list controls spread over every slot. It carries no
// hash tag; only the command and the operator function touch it.
func (k keyspace) controlIndexKey() string { return k.prefix + ":controls" }

// networkControlsKey is the hash of network controls: one field per
// network (its canonical CIDR), each a control record. Every instance
// reads it, at most once per controls.Propagation.
func (k keyspace) networkControlsKey() string { return k.prefix + ":netcontrols" }
