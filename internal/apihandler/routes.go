package apihandler

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// maxLoginBody bounds the login body read into memory.
const maxLoginBody = 4 << 10

// QuotaLimit is one limit in the GET /v1/quota answer.
type QuotaLimit struct {
	// Name is the policy name: the tier ("anonymous", "user", "org"), the
	// plan ("pro", or "pro-1m" for one limit of a list) or the route limit
	// ("POST /auth/*").
	Name string `json:"name"`
	// Limit is how many requests fit in one window.
	Limit int64 `json:"limit"`
	// WindowSeconds is the window, in seconds, rounded up.
	WindowSeconds int64 `json:"window_seconds"`
	// Remaining is how many requests the limit admits right now.
	Remaining int64 `json:"remaining"`
	// ResetSeconds is the same value as the RateLimit header's t: until the
	// limit is unused again, or until the next request would pass when
	// none would now.
	ResetSeconds int64 `json:"reset_seconds"`
	// Shadow is true for a limit evaluated but not enforced
	// (RATE_LIMIT_SHADOW): what it says never refuses a request.
	Shadow bool `json:"shadow,omitempty"`
}

// Quota is the GET /v1/quota answer.
type Quota struct {
	// Limits lists every limit that applies to the caller on this route,
	// the one closest to denying first. Under a scale control, each
	// limit's Limit is its scaled count.
	Limits []QuotaLimit `json:"limits"`
	// Degraded is true when Redis could not answer and the limits shown are
	// this instance's local fallback.
	Degraded bool `json:"degraded"`
	// Control is the live control in force on the caller, when one
	// changed what the limits say; absent otherwise.
	Control *QuotaControl `json:"control,omitempty"`
}

// QuotaControl is the live control on the caller in the GET /v1/quota
// answer.
type QuotaControl struct {
	// Kind is "exempt" (requests are admitted without spending; the
	// limits show the counts as they stand) or "scaled" (the limits are
	// scaled), as the decision log names them (apigw.ControlName).
	Kind string `json:"kind"`
	// Factor is a scale's factor (10, 0.1); absent for an exemption.
	Factor float64 `json:"factor,omitempty"`
	// EndSeconds is how long until the control ends, in seconds, rounded
	// up.
	EndSeconds int64 `json:"end_seconds"`
}

func serveQuota(w http.ResponseWriter, r *http.Request) {
	out, _ := httplimit.OutcomeFromContext[apigw.Outcome](r.Context())
	closest := httplimit.Closest(out.Result)
	q := Quota{Limits: make([]QuotaLimit, 0, len(out.Result.Decisions)), Degraded: out.Result.Degraded}
	if name := out.Control(); name != "" {
		c := out.Result.Control
		q.Control = &QuotaControl{Kind: name, Factor: c.Factor, EndSeconds: httplimit.RetryAfterSeconds(time.Until(c.Until))}
	}
	add := func(d ratelimit.Decision) {
		q.Limits = append(q.Limits, QuotaLimit{
			Name:          d.Limit.Name,
			Limit:         d.Limit.Count,
			WindowSeconds: httplimit.WindowSeconds(d.Limit),
			Remaining:     d.Remaining,
			ResetSeconds:  httplimit.ResetSeconds(d),
			Shadow:        d.Shadow,
		})
	}
	if len(out.Result.Decisions) > 0 {
		add(closest)
	}
	skipped := false
	for _, d := range out.Result.Decisions {
		if !skipped && d == closest {
			skipped = true
			continue
		}
		add(d)
	}
	writeJSON(w, http.StatusOK, q)
}

func serveHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// item is one entry of the example GET /v1/items answer.
type item struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

func serveItems(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string][]item{"items": {
		{ID: 1, Name: "widget"},
		{ID: 2, Name: "gadget"},
	}})
}

// loginRequest is the demo login's body.
type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// serveLogin is a stand-in for a real login: what matters here is the
// limit in front of it. It checks no credentials and issues no token.
func serveLogin(w http.ResponseWriter, r *http.Request) {
	var body loginRequest
	err := json.NewDecoder(io.LimitReader(r.Body, maxLoginBody)).Decode(&body)
	if err != nil || body.Username == "" || body.Password == "" {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "Send a JSON body with username and password.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"message": "Login accepted (demo handler: credentials are not checked).",
	})
}

func serveNotFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "NOT_FOUND", "No such route.")
}

// errorBody has the shape of the rate-limit error bodies.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	var body errorBody
	body.Error.Code, body.Error.Message = code, message
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own fixed types reach here; none fails to encode.
		status, body = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL_ERROR","message":"The answer could not be encoded."}}`)
	}
	w.Header().Set("Content-Type", contract.ContentTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client has gone; nothing left to tell it
}
