package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// ParseRate parses the configuration syntax "<count>/<window>", such as
// "30/1m", "5/10s" or "10000/1h". The window is a Go duration; a bare unit
// means one of it ("100/m" is "100/1m"). Surrounding spaces are ignored.
// It checks the count and the window each on its own, against
// pkg/ratelimit's bounds (ratelimit.MaxCount; a window as Limit.Validate
// takes it); whether their product fits depends on the algorithm, which
// Limit.Validate checks.
func ParseRate(s string) (count int64, window time.Duration, err error) {
	raw := s
	s = strings.TrimSpace(s)
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q: want <count>/<window>, like 30/1m", truncate.Text(raw, 64))
	}
	count, err = strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || count < 1 || count > ratelimit.MaxCount {
		return 0, 0, fmt.Errorf("rate %q: count must be a whole number from 1 to %d", truncate.Text(raw, 64), ratelimit.MaxCount)
	}
	per = strings.TrimSpace(per)
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per
	}
	window, err = time.ParseDuration(per)
	if err != nil {
		// Not wrapped: time's error quotes the whole input, unbounded.
		return 0, 0, fmt.Errorf("rate %q: window %q is not a duration like 1m, 10s or 1h", truncate.Text(raw, 32), truncate.Text(per, 16))
	}
	// The window's own bounds are the library's: a limit of count 1 under
	// the fixed window, which bounds count x window no further.
	if err := (ratelimit.Limit{Name: "window", Count: 1, Window: window, Algorithm: ratelimit.FixedWindow}).Validate(); err != nil {
		return 0, 0, fmt.Errorf("rate %q: %w", truncate.Text(raw, 64), err)
	}
	return count, window, nil
}
