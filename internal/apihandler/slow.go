package apihandler

import (
	"net/http"
	"strconv"
	"time"
)

// maxSlow bounds GET /v1/slow's wait.
const maxSlow = 10 * time.Second

// serveSlow is the example of a slow request (a large export, a slow
// downstream), to show the in-flight limits (RATE_LIMIT_CONCURRENCY): it
// answers after ?ms= milliseconds (0 to 10000, 1000 when absent or
// malformed), or when the request ends first.
func serveSlow(w http.ResponseWriter, r *http.Request) {
	wait := time.Second
	if ms, err := strconv.Atoi(r.URL.Query().Get("ms")); err == nil && ms >= 0 {
		wait = min(time.Duration(ms)*time.Millisecond, maxSlow)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
	}
	writeJSON(w, http.StatusOK, map[string]int64{"waited_ms": wait.Milliseconds()})
}
