package ratelimit

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/keys"
)

// defaultKeyPrefix starts every Redis key unless Options.KeyPrefix says
// otherwise.
const defaultKeyPrefix = keys.DefaultPrefix

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
// starts its callers afresh. The tag and the controls' keys follow the
// rules of internal/keys, which package controls shares.
type keyspace struct {
	prefix  string
	hashKey []byte
	// hashed: Options.HashedIdentities.
	hashed bool
}

// space is k as internal/keys takes it.
func (k keyspace) space() keys.Space {
	return keys.Space{Prefix: k.prefix, HashKey: k.hashKey, Hashed: k.hashed}
}

// digest is keys.Space.Digest.
func (k keyspace) digest(identity string) [sha256.Size]byte { return k.space().Digest(identity) }

// validatePrefix rejects a prefix that could move the hash tag.
func validatePrefix(prefix string) error { return keys.ValidatePrefix(prefix) }

// identityTag is the hash tag of an identity (keys.Space.Tag).
func (k keyspace) identityTag(identity string) string { return k.space().Tag(identity) }

// identityDigest is keys.IdentityDigest.
func identityDigest(hashKey []byte, identity string) [sha256.Size]byte {
	return keys.IdentityDigest(hashKey, identity)
}

// key returns the Redis key of one limit for an identity's tag.
func (k keyspace) key(tag string, l Limit) string {
	return k.keyWithSuffix(tag, keySuffix(l))
}

// keyWithSuffix joins the prefix, the tag and a suffix from keySuffix.
func (k keyspace) keyWithSuffix(tag, suffix string) string { return k.space().WithSuffix(tag, suffix) }

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

// tagLen is the length of an identity's tag.
const tagLen = keys.TagLen

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

// controlKey is the key of an identity's live control (keys.Space.ControlKey).
func (k keyspace) controlKey(tag string) string { return k.space().ControlKey(tag) }

// networkControlsKey is the hash of network controls the control watch
// reads (keys.Space.NetworkControlsKey).
func (k keyspace) networkControlsKey() string { return k.space().NetworkControlsKey() }
