package route

import (
	"fmt"
	"slices"
	"strings"

	"github.com/slidegate/slidegate/internal/truncate"
)

// PathGlob matches request paths segment by segment. Globs are split on
// '/' and empty segments are dropped; paths are read as they are served
// (Path: percent-decoded, dot segments resolved, empty segments
// dropped, so "/auth//login/" and "/%61uth/./login" are "/auth/login").
// Write globs decoded. The rules:
//
//   - a literal segment matches itself exactly (paths are case-sensitive, as
//     in API Gateway);
//   - "*" matches exactly one non-empty segment, except as the LAST segment
//     of the glob, where it matches one or more segments (the rest of the
//     path): "/auth/*" matches "/auth/login" and "/auth/oauth/callback" but
//     not "/auth";
//   - "**" as the last segment matches zero or more segments: "/auth/**"
//     matches "/auth" too;
//   - "**" anywhere else, or a segment mixing '*' with other characters,
//     is an error.
//
// A glob must start with '/'. "/**" matches every path, "/*" every path
// but "/".
type PathGlob struct {
	// Text is the glob as written.
	Text     string
	segments []string
}

// ParsePathGlob parses one path glob.
func ParsePathGlob(s string) (PathGlob, error) {
	if !strings.HasPrefix(s, "/") {
		return PathGlob{}, fmt.Errorf("path glob %q: must start with /", truncate.Text(s, truncate.QuotedLen))
	}
	if len(s) > 1024 {
		return PathGlob{}, fmt.Errorf("path glob %q: longer than 1024 bytes", truncate.Text(s, truncate.QuotedLen))
	}
	segs := splitPath(s)
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case seg == "*":
		case seg == "**":
			if !last {
				return PathGlob{}, fmt.Errorf("path glob %q: ** is only allowed as the last segment", truncate.Text(s, truncate.QuotedLen))
			}
		case strings.Contains(seg, "*"):
			return PathGlob{}, fmt.Errorf("path glob %q: * must be a whole segment", truncate.Text(s, truncate.QuotedLen))
		case strings.ContainsAny(seg, " \t\r\n,="):
			return PathGlob{}, fmt.Errorf("path glob %q: spaces, commas and '=' are not allowed", truncate.Text(s, truncate.QuotedLen))
		}
	}
	return PathGlob{Text: s, segments: segs}, nil
}

// Same reports whether two globs match the same paths: the same segments,
// however written ("/v1//items/" is "/v1/items").
func (g PathGlob) Same(h PathGlob) bool { return slices.Equal(g.segments, h.segments) }

// MatchSegments reports whether the glob matches a path read as segments
// (decoded, dot segments resolved, empty ones dropped: Path's
// readings). No segments is "/".
func (g PathGlob) MatchSegments(path []string) bool {
	return matchSegments(g.segments, path)
}

func matchSegments(glob, path []string) bool {
	for i, seg := range glob {
		last := i == len(glob)-1
		if last && seg == "**" {
			return true
		}
		if i >= len(path) {
			return false
		}
		if last && seg == "*" {
			return true // path[i] exists and is non-empty: one or more segments
		}
		if seg != "*" && seg != path[i] {
			return false
		}
	}
	return len(path) == len(glob)
}

// splitPath splits a glob into its non-empty segments: "/a//b/" is
// ["a", "b"] and "/" is none.
func splitPath(p string) []string {
	segs := strings.Split(p, "/")
	out := segs[:0]
	for _, s := range segs {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
