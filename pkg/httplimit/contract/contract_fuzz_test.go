package contract

import (
	"strings"
	"testing"
)

// FuzzTooManyRequestsBody: whatever wait it is given, the 429 body is one
// line (a header value's neighbour in a gateway response must not be split)
// and says a wait of at least one second.
func FuzzTooManyRequestsBody(f *testing.F) {
	for _, seed := range []int64{0, 1, 18, -1, 1 << 62, -1 << 63} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, retryAfterSeconds int64) {
		body := string(TooManyRequestsBody(retryAfterSeconds))
		if strings.ContainsAny(body, "\r\n") {
			t.Fatalf("429 body has a line break: %q", body)
		}
		if strings.Contains(body, `"retry_after_seconds":0`) || strings.Contains(body, `"retry_after_seconds":-`) {
			t.Fatalf("429 body says a wait below one second: %q", body)
		}
	})
}
