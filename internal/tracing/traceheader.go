package tracing

import (
	"encoding/hex"
	"strings"
)

// traceHeader is what a Lambda trace header says: the X-Ray trace of the
// invocation, the segment to parent spans on, and Lambda's sampling
// decision. It is the OpenTelemetry build's way into the trace API Gateway
// started (otel.go); the parser has no build tag so that its fuzz target
// runs with every other (scripts/fuzz.sh), and it links into no build
// that does not call it.
type traceHeader struct {
	// traceID is the X-Ray trace ID "1-5759e988-bd862e3fe1be46a994272793"
	// as a W3C (OpenTelemetry) trace ID: its 8 hex digits of epoch seconds
	// then its 24 random ones, the version "1-" and the dash dropped.
	traceID [16]byte
	// parentID is the ID of the segment that calls the function: under
	// Lambda, the function's own segment.
	parentID [8]byte
	// sampled is true for Sampled=1 only: Sampled=0, and "?" (a decision
	// left to the receiver), are not sampled.
	sampled bool
}

// parseTraceHeader reads a Lambda (X-Ray) trace header,
//
//	Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1
//
// as Lambda passes it to each invocation. Fields are separated by ';',
// spaces around them are allowed, their order is free, and fields other
// than Root, Parent and Sampled (Lineage, Self) are ignored. ok is false,
// and nothing is traced, when the header is not one whose parent can be
// named for sure: Root or Parent missing, repeated or malformed (hex digits
// are lowercase, as X-Ray writes them), an ID of zeros (invalid in
// OpenTelemetry), or a Sampled that is not 0, 1 or ?. A missing Sampled is
// not sampled.
//
// The header can come from a client (API Gateway passes an X-Amzn-Trace-Id
// it is sent on), so it is parsed strictly and never trusted for more than
// where a span goes.
func parseTraceHeader(header string) (traceHeader, bool) {
	var h traceHeader
	var seenRoot, seenParent, seenSampled bool
	for rest := header; rest != ""; {
		var field string
		field, rest, _ = strings.Cut(rest, ";")
		key, value, hasValue := strings.Cut(strings.TrimSpace(field), "=")
		if !hasValue {
			if key == "" {
				continue // an empty field, as a trailing ';' makes
			}
			return traceHeader{}, false
		}
		switch key {
		case "Root":
			if seenRoot || !parseRoot(value, &h.traceID) {
				return traceHeader{}, false
			}
			seenRoot = true
		case "Parent":
			if seenParent || !decodeLowerHex(h.parentID[:], value) {
				return traceHeader{}, false
			}
			seenParent = true
		case "Sampled":
			if seenSampled {
				return traceHeader{}, false
			}
			switch value {
			case "1":
				h.sampled = true
			case "0", "?":
			default:
				return traceHeader{}, false
			}
			seenSampled = true
		}
	}
	if !seenRoot || !seenParent || isZero(h.traceID[:]) || isZero(h.parentID[:]) {
		return traceHeader{}, false
	}
	return h, true
}

// parseRoot reads an X-Ray trace ID, "1-" then 8 hex digits, "-", 24 hex
// digits, into id.
func parseRoot(root string, id *[16]byte) bool {
	if len(root) != 35 || root[:2] != "1-" || root[10] != '-' {
		return false
	}
	return decodeLowerHex(id[:4], root[2:10]) && decodeLowerHex(id[4:], root[11:])
}

// decodeLowerHex decodes s, lowercase hex digits only, into dst, which it
// must fill exactly.
func decodeLowerHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// isZero reports whether b holds only zero bytes.
func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
