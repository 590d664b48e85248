package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/httplimit/contract"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// handlerBody is what the wrapped handler of these tests answers, so that a
// test can tell whether the request got through.
const handlerBody = `{"ok":true}`

func TestMiddlewareAnswers(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	anonymous := ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}
	login := ratelimit.Limit{Name: "POST /auth/*", Count: 5, Window: time.Minute}
	allowed := ratelimit.Decision{Limit: anonymous, Allowed: true, Remaining: 12, ResetAfter: 41 * time.Second, At: at}
	deniedAnon := ratelimit.Decision{Limit: anonymous, Remaining: 0, ResetAfter: 60 * time.Second, RetryAfter: 17*time.Second + time.Millisecond, At: at}
	loginAllowed := ratelimit.Decision{Limit: login, Allowed: true, Remaining: 1, ResetAfter: 50 * time.Second, At: at}
	loginDenied := ratelimit.Decision{Limit: login, Remaining: 0, ResetAfter: 59 * time.Second, RetryAfter: 48 * time.Second, At: at}

	tests := []struct {
		name       string
		outcome    Outcome
		err        error
		opts       Options
		wantStatus int
		wantBody   string
		// wantHeaders lists exact values; "" means the header must be absent.
		wantHeaders map[string]string
	}{
		{
			name:       "allowed: through, with every contract header and no Retry-After",
			outcome:    Outcome{Kind: Allowed, Result: ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{allowed}}},
			wantStatus: http.StatusOK,
			wantBody:   handlerBody,
			wantHeaders: map[string]string{
				"RateLimit-Policy":      `"anonymous";q=30;w=60`,
				"RateLimit":             `"anonymous";r=12;t=41`,
				"RateLimit-Limit":       "30",
				"RateLimit-Remaining":   "12",
				"RateLimit-Reset":       "41",
				"X-RateLimit-Limit":     "30",
				"X-RateLimit-Remaining": "12",
				"X-RateLimit-Reset":     "1700000041",
				"Retry-After":           "",
				contract.HeaderDegraded: "",
			},
		},
		{
			name:       "allowed by the local fallback: the headers and the degraded sign",
			outcome:    Outcome{Kind: Degraded, Result: ratelimit.Result{Allowed: true, Degraded: true, Decisions: []ratelimit.Decision{allowed}}},
			wantStatus: http.StatusOK,
			wantBody:   handlerBody,
			wantHeaders: map[string]string{
				"RateLimit":             `"anonymous";r=12;t=41`,
				contract.HeaderDegraded: "true",
			},
		},
		{
			name:       "denied by the local fallback: the 429 carries the degraded sign",
			outcome:    Outcome{Kind: Degraded, Result: ratelimit.Result{Allowed: false, Degraded: true, Decisions: []ratelimit.Decision{deniedAnon}}},
			wantStatus: http.StatusTooManyRequests,
			wantBody:   `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 18 seconds.","retry_after_seconds":18}}`,
			wantHeaders: map[string]string{
				"Retry-After":           "18",
				contract.HeaderDegraded: "true",
			},
		},
		{
			name:       "denied: 429, Retry-After rounded up and equal to t, contract body",
			outcome:    Outcome{Kind: Denied, Result: ratelimit.Result{Allowed: false, Decisions: []ratelimit.Decision{deniedAnon}}},
			wantStatus: http.StatusTooManyRequests,
			wantBody:   `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 18 seconds.","retry_after_seconds":18}}`,
			wantHeaders: map[string]string{
				"Content-Type":          "application/json",
				"Retry-After":           "18",
				"RateLimit-Policy":      `"anonymous";q=30;w=60`,
				"RateLimit":             `"anonymous";r=0;t=18`,
				"RateLimit-Limit":       "30",
				"RateLimit-Remaining":   "0",
				"RateLimit-Reset":       "18",
				"X-RateLimit-Limit":     "30",
				"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset":     "1700000018",
			},
		},
		{
			name: "denied by the route limit while the tier allows: headers describe the route limit",
			outcome: Outcome{Kind: Denied, Result: ratelimit.Result{Allowed: false, Decisions: []ratelimit.Decision{
				{Limit: anonymous, Allowed: true, Remaining: 20, ResetAfter: 30 * time.Second, At: at},
				loginDenied,
			}}},
			wantStatus: http.StatusTooManyRequests,
			wantBody:   `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 48 seconds.","retry_after_seconds":48}}`,
			wantHeaders: map[string]string{
				"Retry-After":      "48",
				"RateLimit-Policy": `"anonymous";q=30;w=60, "POST /auth/*";q=5;w=60`,
				"RateLimit":        `"POST /auth/*";r=0;t=48`,
			},
		},
		{
			name: "allowed by two limits: headers describe the one with fewer remaining",
			outcome: Outcome{Kind: Allowed, Result: ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{
				allowed, loginAllowed,
			}}},
			wantStatus: http.StatusOK,
			wantBody:   handlerBody,
			wantHeaders: map[string]string{
				"RateLimit-Policy":    `"anonymous";q=30;w=60, "POST /auth/*";q=5;w=60`,
				"RateLimit-Remaining": "1",
				"Retry-After":         "",
			},
		},
		{
			name:       "fail-closed outage: 503 with Retry-After and the SERVICE_UNAVAILABLE body",
			err:        fmt.Errorf("decide POST /auth/login: %w", ratelimit.ErrUnavailable),
			wantStatus: http.StatusServiceUnavailable,
			wantBody:   `{"error":{"code":"SERVICE_UNAVAILABLE","message":"Rate limiting is temporarily unavailable. Try again in 1 second.","retry_after_seconds":1}}`,
			wantHeaders: map[string]string{
				"Content-Type":     "application/json",
				"Retry-After":      "1",
				"RateLimit-Policy": "",
			},
		},
		{
			name:       "fail-closed outage with a configured wait, rounded up",
			err:        ratelimit.ErrUnavailable,
			opts:       Options{UnavailableRetryAfter: 4500 * time.Millisecond},
			wantStatus: http.StatusServiceUnavailable,
			wantBody:   `{"error":{"code":"SERVICE_UNAVAILABLE","message":"Rate limiting is temporarily unavailable. Try again in 5 seconds.","retry_after_seconds":5}}`,
			wantHeaders: map[string]string{
				"Retry-After": "5",
			},
		},
		{
			name:       "any other error: 500, the error not disclosed",
			err:        fmt.Errorf("decide: %w: secret detail", ratelimit.ErrInvalid),
			wantStatus: http.StatusInternalServerError,
			wantBody:   `{"error":{"code":"INTERNAL_ERROR","message":"The request could not be rate limited."}}`,
			wantHeaders: map[string]string{
				"Content-Type": "application/json",
				"Retry-After":  "",
			},
		},
		{
			name:       "unauthorized within the anonymous limit: 401 with the headers of that limit",
			outcome:    Outcome{Kind: Unauthorized, Result: ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{allowed}}},
			wantStatus: http.StatusUnauthorized,
			wantBody:   `{"error":{"code":"UNAUTHORIZED","message":"The API key or bearer token is not valid."}}`,
			wantHeaders: map[string]string{
				"Content-Type":        "application/json",
				"RateLimit":           `"anonymous";r=12;t=41`,
				"RateLimit-Remaining": "12",
				"Retry-After":         "",
			},
		},
		{
			name:       "unauthorized over the anonymous limit: the 429 wins",
			outcome:    Outcome{Kind: UnauthorizedOverLimit, Result: ratelimit.Result{Allowed: false, Decisions: []ratelimit.Decision{deniedAnon}}},
			wantStatus: http.StatusTooManyRequests,
			wantBody:   `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 18 seconds.","retry_after_seconds":18}}`,
			wantHeaders: map[string]string{
				"Retry-After": "18",
			},
		},
		{
			name:        "unauthorized where no limit applies (an unlimited network): 401, not the handler",
			outcome:     Outcome{Kind: Unauthorized},
			wantStatus:  http.StatusUnauthorized,
			wantBody:    `{"error":{"code":"UNAUTHORIZED","message":"The API key or bearer token is not valid."}}`,
			wantHeaders: map[string]string{"RateLimit": "", "RateLimit-Policy": "", "Retry-After": ""},
		},
		{
			name:        "not limited: through, no headers",
			outcome:     Outcome{},
			wantStatus:  http.StatusOK,
			wantBody:    handlerBody,
			wantHeaders: map[string]string{"RateLimit": "", "RateLimit-Policy": "", "X-RateLimit-Limit": "", "Retry-After": ""},
		},
		{
			name:       "report only, exhausted: through, headers without Retry-After",
			outcome:    Outcome{Kind: Denied, Result: ratelimit.Result{Allowed: false, Decisions: []ratelimit.Decision{deniedAnon}}},
			opts:       Options{ReportOnly: true},
			wantStatus: http.StatusOK,
			wantBody:   handlerBody,
			wantHeaders: map[string]string{
				"RateLimit":           `"anonymous";r=0;t=18`,
				"RateLimit-Remaining": "0",
				"Retry-After":         "",
			},
		},
		{
			name:       "report only, unauthorized over the anonymous limit: the 429 still wins",
			outcome:    Outcome{Kind: UnauthorizedOverLimit, Result: ratelimit.Result{Allowed: false, Decisions: []ratelimit.Decision{deniedAnon}}},
			opts:       Options{ReportOnly: true},
			wantStatus: http.StatusTooManyRequests,
			wantBody:   `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 18 seconds.","retry_after_seconds":18}}`,
			wantHeaders: map[string]string{
				"Retry-After": "18",
				"RateLimit":   `"anonymous";r=0;t=18`,
			},
		},
		{
			name:       "report only, an enforced denial (the route's own limit): 429, not the handler",
			outcome:    Outcome{Kind: Denied, QuotaDenied: true, Result: ratelimit.Result{Allowed: false, Decisions: []ratelimit.Decision{loginDenied}}},
			opts:       Options{ReportOnly: true},
			wantStatus: http.StatusTooManyRequests,
			wantBody:   `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 48 seconds.","retry_after_seconds":48}}`,
			wantHeaders: map[string]string{
				"Retry-After":      "48",
				"RateLimit-Policy": `"POST /auth/*";q=5;w=60`,
				"Cache-Control":    "no-store",
			},
		},
		{
			name:       "report only, unauthorized within the anonymous limit: 401, not the handler",
			outcome:    Outcome{Kind: Unauthorized, Result: ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{allowed}}},
			opts:       Options{ReportOnly: true},
			wantStatus: http.StatusUnauthorized,
			wantBody:   `{"error":{"code":"UNAUTHORIZED","message":"The API key or bearer token is not valid."}}`,
			wantHeaders: map[string]string{
				"RateLimit-Remaining": "12",
				"Retry-After":         "",
			},
		},
		{
			name:       "degraded allowance: through, headers of the fallback limit",
			outcome:    Outcome{Kind: Degraded, Result: ratelimit.Result{Allowed: true, Degraded: true, Decisions: []ratelimit.Decision{{Limit: ratelimit.Limit{Name: "anonymous", Count: 3, Window: time.Minute}, Allowed: true, Remaining: 2, ResetAfter: 20 * time.Second, At: at, Degraded: true}}}},
			wantStatus: http.StatusOK,
			wantBody:   handlerBody,
			wantHeaders: map[string]string{
				"RateLimit-Policy": `"anonymous";q=3;w=60`,
				"RateLimit":        `"anonymous";r=2;t=20`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			tt.opts.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			var reached bool
			var seen Outcome
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				seen, _ = OutcomeFromContext[Outcome](r.Context())
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, handlerBody)
			})
			decide := func(*http.Request) (Outcome, error) { return tt.outcome, tt.err }
			h := Middleware(decide, tt.opts)(next)

			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/items", nil))

			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Errorf("body\n got %s\nwant %s", got, tt.wantBody)
			}
			for name, want := range tt.wantHeaders {
				if got := rec.Header().Get(name); got != want {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
			if wantReached := tt.wantBody == handlerBody; reached != wantReached {
				t.Errorf("handler reached = %v, want %v", reached, wantReached)
			}
			if reached && len(tt.outcome.Result.Decisions) > 0 && len(seen.Result.Decisions) != len(tt.outcome.Result.Decisions) {
				t.Errorf("handler saw outcome %+v, want %+v", seen, tt.outcome)
			}
			if tt.err != nil {
				if !strings.Contains(logs.String(), tt.err.Error()) {
					t.Errorf("log does not name the error %q: %s", tt.err, logs.String())
				}
				if strings.Contains(rec.Body.String(), "secret detail") {
					t.Errorf("error detail leaked to the client: %s", rec.Body.String())
				}
			}
			if rec.Code != http.StatusOK {
				// The middleware's own answers are never cached, as API
				// Gateway's gateway responses are not.
				if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
					t.Errorf("Cache-Control = %q on a %d, want no-store", cc, rec.Code)
				}
				if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(rec.Body.Len()) {
					t.Errorf("Content-Length = %q, body is %d bytes", cl, rec.Body.Len())
				}
				if !json.Valid(rec.Body.Bytes()) {
					t.Errorf("body is not JSON: %s", rec.Body.String())
				}
			}
		})
	}
}

func TestOutcomeFromContextOutsideMiddleware(t *testing.T) {
	if _, ok := OutcomeFromContext[Outcome](httptest.NewRequest(http.MethodGet, "/", nil).Context()); ok {
		t.Fatal("OutcomeFromContext found an outcome in a plain request")
	}
}

// FuzzMiddlewareHeaders feeds arbitrary decisions (names, counts, durations,
// including negative and huge ones) through the middleware: it never panics,
// a denial is always a 429 whose Retry-After is a whole number of seconds of
// at least 1 that agrees with the body and with the t of RateLimit, and every
// header value is a single line of printable ASCII.
func FuzzMiddlewareHeaders(f *testing.F) {
	f.Add("anonymous", int64(30), int64(time.Minute), false, int64(0), int64(17*time.Second+1), int64(60*time.Second), int64(1_700_000_000), false)
	f.Add("POST /auth/*", int64(5), int64(10*time.Second), true, int64(4), int64(0), int64(time.Second), int64(0), true)
	f.Add("\"\\\r\n\x00é", int64(-1), int64(-5), false, int64(-9), int64(-1), int64(-1), int64(-1), false)
	f.Add("", int64(1<<62), int64(1<<62), false, int64(1<<62), int64(1<<62), int64(1<<62), int64(1<<40), true)
	f.Fuzz(func(t *testing.T, name string, count, window int64, allowed bool, remaining, retryAfter, resetAfter, atUnix int64, unauthorized bool) {
		d := ratelimit.Decision{
			Limit:      ratelimit.Limit{Name: name, Count: count, Window: time.Duration(window)},
			Allowed:    allowed,
			Remaining:  remaining,
			RetryAfter: time.Duration(retryAfter),
			ResetAfter: time.Duration(resetAfter),
			At:         time.Unix(atUnix%(1<<40), 0),
		}
		res := ratelimit.Result{Allowed: allowed, Decisions: []ratelimit.Decision{d}}
		out := Outcome{Kind: KindOf(Decided{Unauthorized: unauthorized, Result: res}), Result: res}
		h := Middleware(func(*http.Request) (Outcome, error) { return out, nil }, Options{})(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))

		for key, values := range rec.Header() {
			for _, v := range values {
				for i := 0; i < len(v); i++ {
					if v[i] < 0x20 || v[i] > 0x7e {
						t.Fatalf("header %s = %q has byte %#x", key, v, v[i])
					}
				}
			}
		}
		switch {
		case !allowed:
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("denied outcome answered %d", rec.Code)
			}
			retry, err := strconv.ParseInt(rec.Header().Get("Retry-After"), 10, 64)
			if err != nil || retry < 1 {
				t.Fatalf("Retry-After = %q", rec.Header().Get("Retry-After"))
			}
			if want := string(contract.TooManyRequestsBody(retry)); rec.Body.String() != want {
				t.Fatalf("body %s, want %s", rec.Body.String(), want)
			}
			if !strings.HasSuffix(rec.Header().Get("RateLimit"), ";t="+strconv.FormatInt(retry, 10)) {
				t.Fatalf("RateLimit %q disagrees with Retry-After %d", rec.Header().Get("RateLimit"), retry)
			}
		case unauthorized:
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("unauthorized outcome answered %d", rec.Code)
			}
		default:
			if rec.Code != http.StatusNoContent || rec.Header().Get("Retry-After") != "" {
				t.Fatalf("allowed outcome answered %d with Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
			}
		}
		if rec.Header().Get("RateLimit-Policy") == "" {
			t.Fatal("limited response without RateLimit-Policy")
		}
	})
}

func TestMiddlewareDecideErrorIsWrappedNotReplaced(t *testing.T) {
	// A decide function that wraps ratelimit.ErrUnavailable several levels deep still
	// gets the 503: the middleware branches with errors.Is.
	err := fmt.Errorf("outer: %w", fmt.Errorf("middle: %w", errors.Join(errors.New("dial tcp: refused"), ratelimit.ErrUnavailable)))
	h := Middleware(func(*http.Request) (Outcome, error) { return Outcome{}, err }, Options{Logger: slog.New(slog.DiscardHandler)})(http.NotFoundHandler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/auth/login", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want 503", rec.Code)
	}
}

// TestMiddlewareClipsLoggedError: a decide function's error may quote what
// a caller sent (a 64 KiB path); the failure line carries at most
// maxLoggedError bytes of it, with or without RouteName.
func TestMiddlewareClipsLoggedError(t *testing.T) {
	long := strings.Repeat("p", 64<<10)
	for _, tt := range []struct {
		name      string
		err       error
		routeName func(*http.Request) string
	}{
		{"500, path", errors.New("decide " + long), nil},
		{"503, route", fmt.Errorf("decide %s: %w", long, ratelimit.ErrUnavailable), func(*http.Request) string { return "POST /auth/{proxy+}" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := Middleware(func(*http.Request) (Outcome, error) { return Outcome{}, tt.err },
				Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), RouteName: tt.routeName})(http.NotFoundHandler())
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/auth/x", nil))
			var rec map[string]any
			if err := json.Unmarshal(logs.Bytes(), &rec); err != nil {
				t.Fatalf("one JSON line: %v\n%s", err, logs.String())
			}
			msg, _ := rec["error"].(string)
			if len(msg) > maxLoggedError+len("...") || !strings.HasPrefix(msg, "decide ppp") {
				t.Errorf("logged error of %d bytes: %.80s...", len(msg), msg)
			}
		})
	}
}
