package route

import (
	"net/url"
	"strings"
)

// Path is a request path as the routers behind API Gateway read it,
// ready to be matched by PathGlob (Matches). Route limits and
// fail-closed globs must hold for every spelling that reaches a handler,
// so a path is not matched as written but as it is served:
//
//   - percent-decoded: "/%61uth/login" is "/auth/login". The API function's
//     router (Go's http.ServeMux since Go 1.22) splits the still-escaped
//     path on '/' and unescapes each segment, so "%2F" stays inside its
//     segment there ("/auth%2Flogin" is one segment "auth/login"); most
//     other routers, and ServeMux itself once a stage prefix has been
//     stripped, decode the whole path first, so "%2F" separates segments.
//     Both readings are kept, and a glob matches when it matches either;
//   - dot segments resolved and empty segments dropped: "//auth/./login/"
//     and "/x/../auth/login" are "/auth/login", as a router that cleans its
//     paths serves them. An escaped dot segment ("%2e%2e") is resolved in
//     the whole-path reading only: ServeMux cleans the escaped path, so for
//     it "/auth/%2e%2e/x" stays three segments, the first "auth";
//   - a '%' not followed by two hex digits is kept as it is, in both
//     readings (ServeMux keeps such a segment raw; the API function answers
//     the event 400 before any router sees it). The answer is the same for
//     the same bytes, always.
//
// Decoding happens once: a path that arrives already decoded (an HTTP API
// event's rawPath) and still holds a '%' is decoded again, exactly as the
// Lambda proxy library decodes it again before the router sees it. Paths
// stay case-sensitive, as in API Gateway and ServeMux.
type Path struct {
	// Raw is the path as received.
	Raw string
	// readings are the segment lists the path can be served as, the
	// ServeMux reading first; no two are the same. At most four per path
	// united (Union): per-segment and whole-path decoding, of the path
	// and of the path cut at a '?' or '#'.
	readings [][]string
}

// ParsePath reads a request path as received: percent-encoded (a
// REST event's path, http.Request.URL.EscapedPath) or already decoded once
// (an HTTP API event's rawPath). A path that does not start with '/' is
// read as if it did, as the proxy library serves it. A '?' or '#' in it
// (an HTTP API decodes "%3F" in rawPath) is read both ways: as part of the
// path, and as the end of it, which is where the proxy library's URL
// parser cuts it. It never fails.
func ParsePath(raw string) Path {
	p := Path{Raw: raw, readings: make([][]string, 0, 2)}
	p.addReadings(raw)
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		p.addReadings(raw[:i])
	}
	return p
}

// addReadings adds the per-segment and the whole-path reading of raw.
func (p *Path) addReadings(raw string) {
	// ServeMux cleans the escaped path (only literal dot segments are
	// resolved there), then unescapes segment by segment.
	mux := resolveSegments(strings.Split(raw, "/"))
	for i, s := range mux {
		mux[i] = unescapeSegment(s)
	}
	p.add(mux)
	if strings.Contains(raw, "%") {
		p.add(resolveSegments(strings.Split(unescapeLenient(raw), "/")))
	}
}

func (p *Path) add(segs []string) {
	for _, r := range p.readings {
		if sameSegments(r, segs) {
			return
		}
	}
	p.readings = append(p.readings, segs)
}

// Segments returns the path's segments as the API function's router reads
// them (decoded per segment, dot segments resolved, empty ones dropped).
func (p Path) Segments() []string {
	if len(p.readings) == 0 {
		return nil
	}
	return p.readings[0]
}

// Union is a request path read both as p and as q: a glob matches it when
// it matches either (a REST resource with a path parameter and the path the
// router serves, see apigw.FromRESTAuthorizer). Its Raw and Segments are p's.
func (p Path) Union(q Path) Path {
	u := Path{Raw: p.Raw, readings: make([][]string, 0, len(p.readings)+len(q.readings))}
	for _, r := range p.readings {
		u.add(r)
	}
	for _, r := range q.readings {
		u.add(r)
	}
	return u
}

// unescapeSegment is ServeMux's rule for one segment: unescaped, or kept
// as it is when it does not unescape.
func unescapeSegment(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// unescapeLenient decodes every valid %XX escape of s and keeps any other
// '%' as it is.
func unescapeLenient(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// resolveSegments drops empty and "." segments and lets ".." remove the
// segment before it (none above the root), as RFC 3986 section 5.2.4 and
// path.Clean do. It reuses segs.
func resolveSegments(segs []string) []string {
	out := segs[:0]
	for _, s := range segs {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	return out
}

func sameSegments(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Matches reports whether glob matches any reading of p.
func (p Path) Matches(glob PathGlob) bool {
	for _, r := range p.readings {
		if glob.MatchSegments(r) {
			return true
		}
	}
	// The zero Path is "/".
	return len(p.readings) == 0 && glob.MatchSegments(nil)
}

// Served is p as the API function's router alone reads it (its first
// reading, Segments): the reading the strictest one is compared against.
func (p Path) Served() Path {
	if len(p.readings) == 0 {
		return p
	}
	return Path{Raw: p.Raw, readings: p.readings[:1]}
}
