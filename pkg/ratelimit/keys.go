package ratelimit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// DefaultKeyPrefix starts every Redis key unless Options.KeyPrefix says
// otherwise.
const DefaultKeyPrefix = "rl"

// keyspace builds Redis keys. A key looks like
//
//	rl:{Zq3v0Yg1cF8b9y2Xw4uT7Q}:sw:anonymous:30:60000
//
// prefix, the identity's hash as the cluster hash tag, the algorithm, the
// policy name, the count and the window in milliseconds. The count and the
// window are part of the key because the stored state is only meaningful
// for them (GCRA stores time in units of 1/count): changing a limit starts
// it afresh instead of misreading old state.
type keyspace struct {
	prefix  string
	hashKey []byte
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
	sum := identityDigest(k.hashKey, identity)
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
	var b strings.Builder
	b.Grow(len(k.prefix) + len(tag) + len(l.Name) + 40)
	b.WriteString(k.prefix)
	b.WriteString(":{")
	b.WriteString(tag)
	b.WriteString("}:")
	b.WriteString(algorithmCode(l.Algorithm))
	b.WriteByte(':')
	b.WriteString(keySafeName(l.Name))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(l.Count, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(l.Window.Milliseconds(), 10))
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
