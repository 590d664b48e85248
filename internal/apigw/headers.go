package apigw

import (
	"maps"
	"slices"
	"strings"
)

// maxHeaders bounds how many request headers a Request keeps: API Gateway
// itself caps a request's headers at 10 KB, but a hand-made event can hold
// anything.
const maxHeaders = 128

// credentialHeaders are the headers identity.Resolver reads (lower case).
// They are kept whatever else a request holds: dropping one would turn a
// caller with an unknown key into an anonymous one, and a 401 into a 200.
var credentialHeaders = [...]string{"x-api-key", "authorization"}

// FoldHeaders returns an event's or a request's headers with lower-case
// names, as Request.Headers holds them: the single-value headers,
// completed by the first value of any header present only in the
// multi-value ones (an http.Header is multi-value alone). When names
// differ only in case, the exactly lower-case spelling wins, else the one
// that sorts first: the same headers always give the same Request, which
// a map's iteration order would not. At most maxHeaders are kept: the
// credential headers always, then the others by sorted name.
func FoldHeaders(single map[string]string, multi map[string][]string) map[string]string {
	out := make(map[string]string, min(len(single)+len(multi), maxHeaders))
	foldInto(out, single, func(v string) (string, bool) { return v, true })
	if len(multi) > 0 {
		fromMulti := make(map[string]string, len(multi))
		foldInto(fromMulti, multi, func(vs []string) (string, bool) {
			if len(vs) == 0 {
				return "", false
			}
			return vs[0], true
		})
		for name, v := range fromMulti {
			if _, ok := out[name]; !ok {
				out[name] = v
			}
		}
	}
	if len(out) <= maxHeaders {
		return out
	}
	kept := make(map[string]string, maxHeaders)
	for _, name := range credentialHeaders {
		if v, ok := out[name]; ok {
			kept[name] = v
		}
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if len(kept) == maxHeaders {
			break
		}
		kept[name] = out[name]
	}
	return kept
}

// foldInto adds h to out under lower-case names, visiting the names in
// sorted order so that the first spelling of a name to arrive is always
// the same one; an exactly lower-case spelling replaces it.
func foldInto[V any](out map[string]string, h map[string]V, value func(V) (string, bool)) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		v, ok := value(h[name])
		if !ok {
			continue
		}
		lower := strings.ToLower(name)
		if _, dup := out[lower]; dup && name != lower {
			continue
		}
		out[lower] = v
	}
}
