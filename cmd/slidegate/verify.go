package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// verifyUsage is the help of `slidegate verify`.
const verifyUsage = `Usage: slidegate verify --url API_URL [--api auto|rest|http] [--api-key KEY]

Proves a deployed stack from the outside, as a client sees it: the rate-limit
headers on an allowed answer, a 429 with Retry-After, the headers and the
contract's JSON body, the functions deciding on Redis and not on their local
fallback, and what an unknown route is answered. It prints each check, and
for each that failed, the fix. Exit status 1 when any check failed.

What it spends (docs/operations.md, "slidegate verify"): the quota route's
own limit (RATE_LIMIT_QUOTA, 10/1m by default; GET /v1/quota spends nothing
else) of the caller it runs as, which it spends to the 429, and one request of
that caller's tier or plan limit for GET /v1/items and one for the unknown
route when the API counts it. It runs as its source address (tier anonymous),
or with --api-key as that key: give it a key set aside for verify. When the
caller has at most --max-spend requests left after GET /v1/items (a key set
aside for verify, on a plan of a few requests a window), it spends them to
see the authorizer's denial too: on a REST API, the gateway's 429.

Flags:
`

// verifyFlags are the command line of `slidegate verify`.
type verifyFlags struct {
	url    string
	api    string
	apiKey string
	// maxQuotaCalls bounds the calls spent looking for the quota route's
	// 429.
	maxQuotaCalls int
	// maxSpend is the most requests of the caller's own limit the command
	// spends to see the authorizer's denial.
	maxSpend int
	// wait is the longest the command waits for a quota route an earlier
	// run spent to be free again.
	wait    time.Duration
	timeout time.Duration
}

// API types --api names.
const (
	apiAuto = "auto"
	apiREST = "rest"
	apiHTTP = "http"
)

// Paths verify requests, relative to the API's URL.
const (
	verifyHealthPath  = "/health"
	verifyQuotaPath   = "/v1/quota"
	verifyItemsPath   = "/v1/items"
	verifyUnknownPath = "/slidegate-verify/no-such-route"
)

// verifyCheck is one check's verdict.
type verifyCheck struct {
	name string
	ok   bool
	// skipped is a check that could not run without spending more than
	// the command may (ok is true: nothing failed).
	skipped bool
	// saw is what was observed; fix, for a failed check, what to do.
	saw, fix string
}

// runVerify is `slidegate verify`: it reports whether every check passed.
func runVerify(ctx context.Context, args []string, e env) (failed bool, err error) {
	var f verifyFlags
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprint(e.stderr, verifyUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.url, "url", "", "the API's base URL: a REST API's invoke URL with its stage (https://ID.execute-api.REGION.amazonaws.com/STAGE), an HTTP API's URL, or make local's http://127.0.0.1:3000")
	fs.StringVar(&f.api, "api", apiAuto, "the API type, for the unknown-route check: auto (accept either documented answer and say which), rest or http")
	fs.StringVar(&f.apiKey, "api-key", "", "an API key to send as x-api-key (a key set aside for verify); none: the command is counted by its source address")
	fs.IntVar(&f.maxQuotaCalls, "max-quota-calls", 100, "at most this many GET /v1/quota calls while looking for its 429")
	fs.IntVar(&f.maxSpend, "max-spend", 5, "spend the caller's remaining requests on GET /v1/items to see the authorizer's 429 only when at most this many are left (a key set aside for verify)")
	fs.DurationVar(&f.wait, "wait", 90*time.Second, "longest wait for a quota limit an earlier run spent")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "timeout of each request")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, nil
		}
		return false, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "slidegate verify: unexpected argument %q\n", fs.Arg(0))
		return false, errUsage
	}
	base, err := parseAPIURL(f.url)
	if err != nil {
		fmt.Fprintf(e.stderr, "slidegate verify: --url: %v\n", err)
		return false, errUsage
	}
	switch f.api {
	case apiAuto, apiREST, apiHTTP:
	default:
		fmt.Fprintf(e.stderr, "slidegate verify: --api: want auto, rest or http, got %q\n", f.api)
		return false, errUsage
	}
	if f.maxQuotaCalls < 1 || f.maxSpend < 0 || f.timeout <= 0 || f.wait < 0 {
		fmt.Fprintln(e.stderr, "slidegate verify: --max-quota-calls must be at least 1, --max-spend and --wait not negative, --timeout above 0")
		return false, errUsage
	}

	v := &verifier{base: base, flags: f, client: &http.Client{
		Timeout: f.timeout,
		// A redirect is not an answer of the stack: it is reported as
		// it is, and the API key is never sent to another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	fmt.Fprintf(e.stdout, "slidegate verify %s\n", base)
	checks := v.run(ctx)
	for _, c := range checks {
		verdict := "PASS"
		if c.skipped {
			verdict = "SKIP"
		}
		if !c.ok {
			verdict, failed = "FAIL", true
		}
		fmt.Fprintf(e.stdout, "%s  %-26s %s\n", verdict, c.name, c.saw)
		if !c.ok && c.fix != "" {
			fmt.Fprintf(e.stdout, "      fix: %s\n", c.fix)
		}
	}
	if failed {
		fmt.Fprintln(e.stdout, "verify: FAILED")
	} else {
		fmt.Fprintln(e.stdout, "verify: every check passed")
	}
	return failed, ctx.Err()
}

// parseAPIURL checks the --url value: an absolute http or https URL, kept
// without a trailing slash so that paths join onto it.
func parseAPIURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("the API's URL is required (the stack's ApiUrl output, or make local's http://127.0.0.1:3000)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("want an http or https URL with a host, got %q", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("want the API's base URL without a query or fragment, got %q", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// verifier runs the checks against one API.
type verifier struct {
	base   string
	flags  verifyFlags
	client *http.Client
}

// answer is one response, its body read whole (bounded).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// maxVerifyBody bounds how much of a body is read: every answer checked
// is a small JSON document.
const maxVerifyBody = 64 << 10

func (v *verifier) get(ctx context.Context, path string) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if v.flags.apiKey != "" {
		req.Header.Set("x-api-key", v.flags.apiKey)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxVerifyBody))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read the body: %w", path, err)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// Fixes the checks print.
const (
	fixURL = "check --url: the stack's ApiUrl output (a REST API's URL ends with its stage, /Prod), and that `sam deploy` finished; " +
		"an API function that fails answers 5xx: its CloudWatch logs say why"
	fixStripped = "something between this command and API Gateway drops or rewrites the rate-limit headers (a CDN, a proxy, a custom domain's " +
		"distribution): forward RateLimit, RateLimit-Policy, RateLimit-Limit/-Remaining/-Reset, X-RateLimit-* and Retry-After unchanged; " +
		"if nothing is in between, the address this runs from may be in an unlimited network or under a live network exemption " +
		"(answered without rate-limit headers: run it from another address), or the deployed functions are not this version of slidegate"
	fixFallback = "the %s decides from its local fallback: it cannot reach Redis, or cannot read the Redis AUTH token or the identity hash key " +
		"from Secrets Manager. Read its cold-start errors in CloudWatch Logs; check the Secrets Manager VPC endpoint (or a NAT), the security " +
		"group that lets the functions reach the cache's port, REDIS_URL, and the function role's secretsmanager:GetSecretValue"
	fixBody = "the 429's body is not the contract's JSON (docs/contract.md, Bodies): something between this command and API Gateway " +
		"replaces error bodies (a CDN's or proxy's error page), or the template's gateway responses were edited"
)

// run performs every check in order; a stack that does not answer stops
// it after the first.
func (v *verifier) run(ctx context.Context) []verifyCheck {
	health, err := v.get(ctx, verifyHealthPath)
	switch {
	case err != nil:
		return []verifyCheck{{name: "reachable", saw: err.Error(), fix: fixURL}}
	case health.status != http.StatusOK || !jsonEqual(health.body, `{"status":"ok"}`):
		return []verifyCheck{{name: "reachable", saw: fmt.Sprintf("GET %s answered %d %s, not 200 {\"status\":\"ok\"}", verifyHealthPath, health.status, clipBody(health.body)), fix: fixURL}}
	}
	checks := []verifyCheck{{name: "reachable", ok: true, saw: "GET /health: 200"}}
	checks = append(checks, v.checkQuota(ctx)...)
	authorized, remaining := v.checkAuthorized(ctx)
	checks = append(checks, authorized...)
	checks = append(checks, v.checkUnknownRoute(ctx))
	// Last: once the caller is denied, an unknown route behind the
	// authorizer would be denied too.
	if remaining >= 0 {
		checks = append(checks, v.checkAuthorizerDenial(ctx, remaining))
	}
	return checks
}

// checkQuota checks GET /v1/quota: an allowed answer with the headers and
// "degraded": false (the API function decides on Redis), then its 429
// once the quota route's own limit is spent.
func (v *verifier) checkQuota(ctx context.Context) []verifyCheck {
	first, err := v.get(ctx, verifyQuotaPath)
	if err == nil && first.status == http.StatusTooManyRequests {
		// An earlier run (or another client of this caller) spent the
		// quota route's limit: wait for it once, when the wait is short.
		if retry, perr := strconv.Atoi(first.header.Get("Retry-After")); perr == nil && retry >= 1 && time.Duration(retry)*time.Second <= v.flags.wait {
			select {
			case <-ctx.Done():
				return []verifyCheck{{name: "allowed answer", saw: ctx.Err().Error()}}
			case <-time.After(time.Duration(retry) * time.Second):
			}
			first, err = v.get(ctx, verifyQuotaPath)
		}
	}
	allowed := verifyCheck{name: "allowed answer"}
	if err != nil {
		allowed.saw, allowed.fix = err.Error(), fixURL
		return []verifyCheck{allowed}
	}
	if first.status != http.StatusOK {
		allowed.saw = fmt.Sprintf("GET %s answered %d %s, not 200", verifyQuotaPath, first.status, clipBody(first.body))
		allowed.fix = "GET /v1/quota is the API function's, without an authorizer (docs/contract.md); a 429 here means the quota limit is still spent: run again after its Retry-After"
		return []verifyCheck{allowed}
	}
	if problems := headerProblems(first.header, false); len(problems) > 0 {
		allowed.saw = fmt.Sprintf("GET %s: 200, but %s", verifyQuotaPath, strings.Join(problems, "; "))
		allowed.fix = fixStripped
	} else {
		allowed.ok = true
		allowed.saw = fmt.Sprintf("GET %s: 200, RateLimit %s", verifyQuotaPath, first.header.Get("RateLimit"))
	}
	checks := []verifyCheck{allowed, fallbackCheck("API function on Redis", "API function", verifyQuotaPath, first)}
	return append(checks, v.checkDenial(ctx))
}

// fallbackCheck reads the fallback signs of the answer a to GET path: the
// contract.HeaderDegraded header and, for GET /v1/quota, the body's
// "degraded".
func fallbackCheck(name, function, path string, a *answer) verifyCheck {
	c := verifyCheck{name: name, fix: fmt.Sprintf(fixFallback, function)}
	if a.header.Get(contract.HeaderDegraded) != "" {
		c.saw = fmt.Sprintf("GET %s: %s: %s", path, contract.HeaderDegraded, a.header.Get(contract.HeaderDegraded))
		return c
	}
	if path == verifyQuotaPath {
		var q struct {
			Degraded *bool `json:"degraded"`
		}
		if err := json.Unmarshal(a.body, &q); err != nil || q.Degraded == nil {
			c.saw = fmt.Sprintf("GET %s's body has no \"degraded\": %s", verifyQuotaPath, clipBody(a.body))
			c.fix = "the API function is not this version of slidegate's, or something rewrites its answers"
			return c
		}
		if *q.Degraded {
			c.saw = fmt.Sprintf("GET %s says \"degraded\":true", verifyQuotaPath)
			return c
		}
		c.ok, c.saw = true, fmt.Sprintf("GET %s: \"degraded\":false, no %s", verifyQuotaPath, contract.HeaderDegraded)
		return c
	}
	c.ok, c.saw = true, fmt.Sprintf("GET %s: no %s", path, contract.HeaderDegraded)
	return c
}

// checkDenial spends the quota route's own limit to its 429 and checks the
// 429: Retry-After, the headers and the contract's body.
func (v *verifier) checkDenial(ctx context.Context) verifyCheck {
	c := verifyCheck{name: "denial (429)"}
	for call := 1; call <= v.flags.maxQuotaCalls; call++ {
		a, err := v.get(ctx, verifyQuotaPath)
		if err != nil {
			c.saw, c.fix = err.Error(), fixURL
			return c
		}
		switch a.status {
		case http.StatusOK:
			continue
		case http.StatusTooManyRequests:
		default:
			c.saw = fmt.Sprintf("GET %s answered %d %s, where 200 or 429 was due", verifyQuotaPath, a.status, clipBody(a.body))
			c.fix = fixURL
			return c
		}
		problems := headerProblems(a.header, true)
		c.fix = fixStripped
		if p := denialBodyProblem(a); p != "" {
			problems = append(problems, p)
			c.fix = fixBody
		}
		if len(problems) > 0 {
			c.saw = fmt.Sprintf("GET %s: 429 after %d calls, but %s", verifyQuotaPath, call, strings.Join(problems, "; "))
			return c
		}
		c.fix = ""
		c.ok = true
		c.saw = fmt.Sprintf("GET %s: 429 after %d calls, Retry-After %s, headers and JSON body as the contract says", verifyQuotaPath, call, a.header.Get("Retry-After"))
		return c
	}
	c.saw = fmt.Sprintf("no 429 after %d calls of GET %s", v.flags.maxQuotaCalls, verifyQuotaPath)
	c.fix = "RATE_LIMIT_QUOTA (the RateLimitQuota parameter, stage variable rateLimitQuota) allows more calls a window than --max-quota-calls: keep it small (10/1m by default) or raise --max-quota-calls"
	return c
}

// checkAuthorized sends one request through the authorizer (GET
// /v1/items): an allowed answer with the headers, decided on Redis. It
// also returns the caller's RateLimit-Remaining, -1 when the answer does
// not say.
func (v *verifier) checkAuthorized(ctx context.Context) ([]verifyCheck, int64) {
	c := verifyCheck{name: "authorized route"}
	a, err := v.get(ctx, verifyItemsPath)
	if err != nil {
		c.saw, c.fix = err.Error(), fixURL
		return []verifyCheck{c}, -1
	}
	switch a.status {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		c.saw = fmt.Sprintf("GET %s answered 429: the caller this command runs as has spent its limit", verifyItemsPath)
		c.fix = "run again after Retry-After (" + a.header.Get("Retry-After") + " s), or with --api-key of a key set aside for verify"
		return []verifyCheck{c}, -1
	default:
		c.saw = fmt.Sprintf("GET %s answered %d %s, not 200", verifyItemsPath, a.status, clipBody(a.body))
		c.fix = "GET /v1/items passes the authorizer: a 401 means --api-key is not a known key; a 403 or 5xx, read the authorizer's CloudWatch logs"
		return []verifyCheck{c}, -1
	}
	if problems := headerProblems(a.header, false); len(problems) > 0 {
		c.saw, c.fix = fmt.Sprintf("GET %s: 200, but %s", verifyItemsPath, strings.Join(problems, "; ")), fixStripped
	} else {
		c.ok, c.saw = true, fmt.Sprintf("GET %s: 200, RateLimit %s", verifyItemsPath, a.header.Get("RateLimit"))
	}
	remaining, err := strconv.ParseInt(a.header.Get("RateLimit-Remaining"), 10, 64)
	if err != nil {
		remaining = -1
	}
	return []verifyCheck{c, fallbackCheck("authorizer on Redis", "authorizer (or the API function behind it)", verifyItemsPath, a)}, remaining
}

// checkAuthorizerDenial spends what is left of the caller's limit on GET
// /v1/items to see the authorizer's denial (on a REST API, API Gateway's
// ACCESS_DENIED gateway response), when that is at most --max-spend
// requests: a key set aside for verify, on a plan of a few requests a
// window. Otherwise it is skipped, saying how to run it.
func (v *verifier) checkAuthorizerDenial(ctx context.Context, remaining int64) verifyCheck {
	c := verifyCheck{name: "authorizer denial (429)"}
	if remaining > int64(v.flags.maxSpend) {
		c.ok, c.skipped = true, true
		c.saw = fmt.Sprintf("the caller has %d requests left on GET %s, more than --max-spend %d: give --api-key of a key set aside for verify, on a plan of a few requests a window, to see the authorizer's 429", remaining, verifyItemsPath, v.flags.maxSpend)
		return c
	}
	// Two more than remaining: the unknown route may not have spent one.
	for call := int64(1); call <= remaining+2; call++ {
		a, err := v.get(ctx, verifyItemsPath)
		if err != nil {
			c.saw, c.fix = err.Error(), fixURL
			return c
		}
		switch {
		case a.status == http.StatusOK:
			continue
		case a.status == http.StatusTooManyRequests:
			problems := headerProblems(a.header, true)
			c.fix = fixStripped
			if p := denialBodyProblem(a); p != "" {
				problems = append(problems, p)
				c.fix = fixBody
			}
			if len(problems) > 0 {
				c.saw = fmt.Sprintf("GET %s: 429, but %s", verifyItemsPath, strings.Join(problems, "; "))
				return c
			}
			c.ok, c.fix = true, ""
			c.saw = fmt.Sprintf("GET %s: 429, Retry-After %s, headers and JSON body as the contract says", verifyItemsPath, a.header.Get("Retry-After"))
			return c
		case a.status == http.StatusForbidden && isForbidden(a.body) && v.flags.api != apiREST:
			c.ok = true
			c.saw = fmt.Sprintf("GET %s: 403 Forbidden from the HTTP API's gateway (HTTP_API_DENIALS=refuse: no rate-limit headers, as docs/contract.md says)", verifyItemsPath)
			return c
		default:
			c.saw = fmt.Sprintf("GET %s answered %d %s where the authorizer's 429 was due", verifyItemsPath, a.status, clipBody(a.body))
			c.fix = "a REST API answers the authorizer's Deny with the template's ACCESS_DENIED gateway response (429): check that the stack's gateway responses are the template's"
			return c
		}
	}
	c.saw = fmt.Sprintf("GET %s still 200 after %d more requests, when the caller had %d left", verifyItemsPath, remaining+2, remaining)
	c.fix = "the authorizer is not counting this caller's requests: read its CloudWatch logs, and check that GET /v1/items has the authorizer"
	return c
}

// isForbidden reports whether body is an HTTP API's own 403 body.
func isForbidden(body []byte) bool {
	var m struct {
		Message string `json:"message"`
	}
	return json.Unmarshal(body, &m) == nil && m.Message == "Forbidden"
}

// checkUnknownRoute checks what an unknown route is answered: the API
// function's counted 404 (an HTTP API, or a REST API with a catch-all
// route), or API Gateway's own 403 MISSING_AUTHENTICATION_TOKEN (a REST
// API without one), as docs/contract.md and docs/deploy.md say; it reports
// which it saw.
func (v *verifier) checkUnknownRoute(ctx context.Context) verifyCheck {
	c := verifyCheck{name: "unknown route"}
	a, err := v.get(ctx, verifyUnknownPath)
	if err != nil {
		c.saw, c.fix = err.Error(), fixURL
		return c
	}
	switch {
	case a.status == http.StatusNotFound && jsonErrorCode(a.body) == "NOT_FOUND":
		if problems := headerProblems(a.header, false); len(problems) > 0 {
			c.saw, c.fix = fmt.Sprintf("GET %s: the API function's 404, but %s", verifyUnknownPath, strings.Join(problems, "; ")), fixStripped
			return c
		}
		if a.header.Get(contract.HeaderDegraded) != "" {
			c.saw = fmt.Sprintf("GET %s: the API function's counted 404, decided by the local fallback (%s)", verifyUnknownPath, contract.HeaderDegraded)
			c.fix = fmt.Sprintf(fixFallback, "authorizer or the API function")
			return c
		}
		c.ok, c.saw = true, fmt.Sprintf("GET %s: 404 NOT_FOUND from the API function, counted (RateLimit %s)", verifyUnknownPath, a.header.Get("RateLimit"))
	case a.status == http.StatusForbidden && isMissingAuthToken(a.body):
		if v.flags.api == apiHTTP {
			c.saw = fmt.Sprintf("GET %s: 403 Missing Authentication Token, a REST API's answer, where --api http expects the counted 404", verifyUnknownPath)
			c.fix = "the URL is a REST API's: run with --api rest (or auto), or give the HTTP API's URL"
			return c
		}
		c.ok, c.saw = true, fmt.Sprintf("GET %s: 403 MISSING_AUTHENTICATION_TOKEN from API Gateway (a REST API without a catch-all route: not counted, as docs/deploy.md says)", verifyUnknownPath)
	default:
		c.saw = fmt.Sprintf("GET %s answered %d %s", verifyUnknownPath, a.status, clipBody(a.body))
		c.fix = "docs/contract.md documents the API function's counted 404 {\"error\":{\"code\":\"NOT_FOUND\",...}} with the rate-limit headers, or on a REST API " +
			"without a catch-all route API Gateway's 403 {\"message\":\"Missing Authentication Token\"}; anything else comes from something in between or another API"
	}
	return c
}

// isMissingAuthToken reports whether body is API Gateway's default
// MISSING_AUTHENTICATION_TOKEN body.
func isMissingAuthToken(body []byte) bool {
	var m struct {
		Message string `json:"message"`
	}
	return json.Unmarshal(body, &m) == nil && m.Message == "Missing Authentication Token"
}

// jsonErrorCode is the error.code of a contract error body, "" when body
// is not one.
func jsonErrorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// denialBodyProblem checks a 429's body against the contract: valid JSON,
// application/json, code TOO_MANY_REQUESTS, a message, and
// retry_after_seconds of at least 1 and equal to Retry-After when that is
// present. It returns "" when it holds.
func denialBodyProblem(a *answer) string {
	var e struct {
		Error *struct {
			Code       string `json:"code"`
			Message    string `json:"message"`
			RetryAfter *int64 `json:"retry_after_seconds"`
		} `json:"error"`
	}
	if !json.Valid(a.body) {
		return fmt.Sprintf("the body is not valid JSON: %s", clipBody(a.body))
	}
	if err := json.Unmarshal(a.body, &e); err != nil || e.Error == nil {
		return fmt.Sprintf("the body is not the contract's error object: %s", clipBody(a.body))
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Sprintf("Content-Type is %q, not application/json", ct)
	}
	switch {
	case e.Error.Code != "TOO_MANY_REQUESTS":
		return fmt.Sprintf("the body's code is %q, not TOO_MANY_REQUESTS", e.Error.Code)
	case e.Error.Message == "":
		return "the body has no message"
	case e.Error.RetryAfter == nil || *e.Error.RetryAfter < 1:
		return fmt.Sprintf("the body's retry_after_seconds is missing or below 1: %s", clipBody(a.body))
	case a.header.Get("Retry-After") != "" && strconv.FormatInt(*e.Error.RetryAfter, 10) != a.header.Get("Retry-After"):
		// A missing Retry-After is the headers' problem, named there.
		return fmt.Sprintf("the body's retry_after_seconds is not Retry-After (%q): %s", a.header.Get("Retry-After"), clipBody(a.body))
	}
	return ""
}

// The formats of docs/contract.md's Headers table.
var (
	policyItem    = regexp.MustCompile(`^"(?:[^"\\]|\\.)*";q=[0-9]+;w=[0-9]+$`)
	rateLimitItem = regexp.MustCompile(`^"(?:[^"\\]|\\.)*";r=([0-9]+);t=([0-9]+)$`)
)

// headerProblems checks the rate-limit headers of a limited answer against
// the contract's formats and against each other; denied adds Retry-After
// (at least 1, equal to t) and Cache-Control: no-store, and allowed
// requires Retry-After absent. It returns one phrase per problem.
func headerProblems(h http.Header, denied bool) []string {
	var problems []string
	missing := []string{}
	for _, name := range []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if h.Get(name) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "missing "+strings.Join(missing, ", "))
	}
	if p := h.Get("RateLimit-Policy"); p != "" {
		for _, item := range splitListItems(p) {
			if !policyItem.MatchString(item) {
				problems = append(problems, fmt.Sprintf("RateLimit-Policy item %q is not \"name\";q=N;w=N", item))
				break
			}
		}
	}
	var remaining, reset string
	if rl := h.Get("RateLimit"); rl != "" {
		m := rateLimitItem.FindStringSubmatch(rl)
		if m == nil {
			problems = append(problems, fmt.Sprintf("RateLimit %q is not \"name\";r=N;t=N", rl))
		} else {
			remaining, reset = m[1], m[2]
		}
	}
	for _, name := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if v := h.Get(name); v != "" {
			if _, err := strconv.ParseUint(v, 10, 63); err != nil {
				problems = append(problems, fmt.Sprintf("%s %q is not an integer", name, v))
			}
		}
	}
	same := func(a, b string) {
		if h.Get(a) != "" && h.Get(b) != "" && h.Get(a) != h.Get(b) {
			problems = append(problems, fmt.Sprintf("%s %s differs from %s %s", a, h.Get(a), b, h.Get(b)))
		}
	}
	same("RateLimit-Limit", "X-RateLimit-Limit")
	same("RateLimit-Remaining", "X-RateLimit-Remaining")
	if remaining != "" && h.Get("RateLimit-Remaining") != "" && remaining != h.Get("RateLimit-Remaining") {
		problems = append(problems, fmt.Sprintf("RateLimit r=%s differs from RateLimit-Remaining %s", remaining, h.Get("RateLimit-Remaining")))
	}
	if reset != "" && h.Get("RateLimit-Reset") != "" && reset != h.Get("RateLimit-Reset") {
		problems = append(problems, fmt.Sprintf("RateLimit t=%s differs from RateLimit-Reset %s", reset, h.Get("RateLimit-Reset")))
	}
	retry := h.Get("Retry-After")
	if !denied {
		if retry != "" {
			problems = append(problems, "Retry-After on an answer that let the request through")
		}
		return problems
	}
	if n, err := strconv.ParseInt(retry, 10, 64); err != nil || n < 1 {
		problems = append(problems, fmt.Sprintf("Retry-After %q is not whole seconds of at least 1", retry))
	} else if reset != "" && reset != retry {
		problems = append(problems, fmt.Sprintf("Retry-After %s differs from RateLimit t=%s", retry, reset))
	}
	if cc := h.Get("Cache-Control"); cc != "no-store" {
		problems = append(problems, fmt.Sprintf("Cache-Control is %q, not no-store", cc))
	}
	return problems
}

// splitListItems splits a Structured Field list at its commas outside
// quoted strings, trimming the spaces around each item.
func splitListItems(v string) []string {
	var items []string
	start, quoted, escaped := 0, false, false
	for i := 0; i < len(v); i++ {
		switch {
		case escaped:
			escaped = false
		case quoted && v[i] == '\\':
			escaped = true
		case v[i] == '"':
			quoted = !quoted
		case v[i] == ',' && !quoted:
			items = append(items, strings.TrimSpace(v[start:i]))
			start = i + 1
		}
	}
	return append(items, strings.TrimSpace(v[start:]))
}

// jsonEqual reports whether body is the JSON document want, whatever its
// spacing.
func jsonEqual(body []byte, want string) bool {
	var got, exp any
	if json.Unmarshal(body, &got) != nil || json.Unmarshal([]byte(want), &exp) != nil {
		return false
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(exp)
	return string(g) == string(w)
}

// clipBody quotes at most the first 120 bytes of a body for a message.
func clipBody(body []byte) string {
	const shown = 120
	if len(body) > shown {
		return strconv.Quote(string(body[:shown])) + "..."
	}
	return strconv.Quote(string(body))
}
