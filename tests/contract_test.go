package tests

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// The contract tests hold docs/contract.md, template.yaml's gateway
// responses and the Go code to one another: a REST API's 429, 401 and 503
// come from the gateway responses, an HTTP API's from the API function's
// middleware, and a client must not be able to tell which answered.

const contractPath = "../docs/contract.md"

// contractDenial is a denial as Redis would decide it, with a clock that
// is not on a whole second (X-RateLimit-Reset rounds up).
func contractDenial(retry time.Duration) ratelimit.Decision {
	return ratelimit.Decision{
		Limit:      ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute},
		Allowed:    false,
		Remaining:  0,
		ResetAfter: 47 * time.Second,
		RetryAfter: retry,
		At:         time.Unix(1767225600, 250_000_000),
	}
}

// contractMiddlewareAnswer is what the API function's middleware answers
// for an outcome (or an error), with the header names respelled as the
// function sends them (contract.SpecHeaderName). Content-Type and
// Content-Length are left out: a gateway response's template sets the
// first, API Gateway the second.
func contractMiddlewareAnswer(out apigw.Outcome, err error) (int, map[string]string, string) {
	mw := httplimit.Middleware(func(*http.Request) (apigw.Outcome, error) { return out, err },
		httplimit.Options{Logger: slog.New(slog.DiscardHandler)})
	rec := httptest.NewRecorder()
	mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/items", nil))
	headers := map[string]string{}
	for name, values := range rec.Header() {
		if name == "Content-Type" || name == "Content-Length" {
			continue
		}
		headers[contract.SpecHeaderName(name)] = strings.Join(values, ",")
	}
	return rec.Code, headers, rec.Body.String()
}

// contractRender is what API Gateway makes of a gateway response's header
// mapping value or body template for an authorizer context: 'static'
// values unquoted, context.authorizer.<key> (header) and
// $context.authorizer.<key> (body) replaced by the context's value as a
// string. A key the context lacks renders empty, as in API Gateway.
var contractCtxRef = regexp.MustCompile(`\$?context\.authorizer\.([A-Za-z0-9_]+)`)

func contractRender(s string, ctx map[string]any) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return s[1 : len(s)-1]
	}
	return contractCtxRef.ReplaceAllStringFunc(s, func(ref string) string {
		v, ok := ctx[contractCtxRef.FindStringSubmatch(ref)[1]]
		if !ok {
			return ""
		}
		return fmt.Sprint(v)
	})
}

// contractGatewayProblems compares the REST API's gateway responses in the
// template text raw with the API function's answers to the same
// decisions, and returns every difference.
func contractGatewayProblems(raw []byte) []string {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Content) != 1 {
		return []string{fmt.Sprintf("parse template: %v", err)}
	}
	apis := tplResources(doc.Content[0], "AWS::Serverless::Api")
	if len(apis) != 1 {
		return []string{fmt.Sprintf("want one AWS::Serverless::Api, got %d", len(apis))}
	}
	return contractResponseProblems(yamlGet(yamlGet(apis[0].node, "Properties"), "GatewayResponses"))
}

// contractResponseProblems is contractGatewayProblems of the gateway
// responses themselves, in the shape of SAM's GatewayResponses (response
// type -> StatusCode, ResponseParameters.Headers, ResponseTemplates).
func contractResponseProblems(responses *yaml.Node) []string {
	var problems []string
	compare := func(responseType string, ctx map[string]any, wantStatus int, wantHeaders map[string]string, wantBody string) {
		resp := yamlGet(responses, responseType)
		if resp == nil {
			problems = append(problems, responseType+": missing")
			return
		}
		if got := yamlScalar(yamlGet(resp, "StatusCode")); got != strconv.Itoa(wantStatus) {
			problems = append(problems, fmt.Sprintf("%s: StatusCode %q, the API function answers %d", responseType, got, wantStatus))
		}
		got := map[string]string{}
		headers := yamlGet(yamlGet(resp, "ResponseParameters"), "Headers")
		if headers != nil {
			for i := 0; i+1 < len(headers.Content); i += 2 {
				got[headers.Content[i].Value] = contractRender(headers.Content[i+1].Value, ctx)
			}
		}
		for name, want := range wantHeaders {
			if v, ok := got[name]; !ok {
				problems = append(problems, fmt.Sprintf("%s: no header %s (the API function sends %s: %s)", responseType, name, name, want))
			} else if v != want {
				problems = append(problems, fmt.Sprintf("%s: header %s renders %q, the API function sends %q", responseType, name, v, want))
			}
		}
		for name := range got {
			if _, ok := wantHeaders[name]; !ok {
				problems = append(problems, fmt.Sprintf("%s: header %s, which the API function does not send", responseType, name))
			}
		}
		templates := yamlGet(resp, "ResponseTemplates")
		if templates == nil || len(templates.Content) != 2 || templates.Content[0].Value != contract.ContentTypeJSON {
			problems = append(problems, fmt.Sprintf("%s: want exactly one response template, %s", responseType, contract.ContentTypeJSON))
		}
		if body := contractRender(yamlScalar(yamlGet(templates, contract.ContentTypeJSON)), ctx); body != wantBody {
			problems = append(problems, fmt.Sprintf("%s: body renders\n  %s\nthe API function answers\n  %s", responseType, body, wantBody))
		}
	}

	// 429: the authorizer's context of a denial, rendered, against the
	// middleware's answer to the same decision; "1 second" and "N seconds".
	for _, retry := range []time.Duration{300 * time.Millisecond, 17200 * time.Millisecond} {
		d := contractDenial(retry)
		out := apigw.Outcome{Kind: apigw.Denied, Caller: identity.Caller{Tier: identity.TierAnonymous}, Result: ratelimit.Result{Allowed: false, Decisions: []ratelimit.Decision{d}}}
		status, headers, body := contractMiddlewareAnswer(out, nil)
		compare("ACCESS_DENIED", apigw.AuthorizerContext(out), status, headers, body)
	}

	// 401: the REST authorizer answers "Unauthorized" without a context, so
	// the gateway's 401 has none of the rate-limit headers the
	// middleware's carries; the rest is the same.
	allowed := contractDenial(0)
	allowed.Allowed, allowed.Remaining = true, 29
	status, headers, body := contractMiddlewareAnswer(apigw.Outcome{
		Kind:   apigw.Unauthorized,
		Result: ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{allowed}},
	}, nil)
	for name := range headers {
		if lower := strings.ToLower(name); strings.HasPrefix(lower, "ratelimit") || strings.HasPrefix(lower, "x-ratelimit") {
			delete(headers, name)
		}
	}
	compare("UNAUTHORIZED", map[string]any{}, status, headers, body)

	// 503: static in the template, the middleware's default.
	status, headers, body = contractMiddlewareAnswer(apigw.Outcome{}, fmt.Errorf("decide: %w", ratelimit.ErrUnavailable))
	for _, responseType := range []string{"AUTHORIZER_FAILURE", "AUTHORIZER_CONFIGURATION_ERROR"} {
		compare(responseType, map[string]any{}, status, headers, body)
	}
	return problems
}

// TestContractGatewayResponses: a REST API's gateway responses render, for
// the authorizer's context, exactly what the API function's middleware
// answers an HTTP API for the same decision: status, header names and
// values, body bytes.
func TestContractGatewayResponses(t *testing.T) {
	raw, err := os.ReadFile(tplPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range contractGatewayProblems(raw) {
		t.Error(p)
	}
}

// TestContractGatewayResponsesDrift: the comparison above notices every
// kind of drift, on mutated copies of template.yaml.
func TestContractGatewayResponsesDrift(t *testing.T) {
	raw, err := os.ReadFile(tplPath)
	if err != nil {
		t.Fatal(err)
	}
	tpl := string(raw)
	mutations := []struct {
		name, old, new string
	}{
		{"429 body message", `"message":"Rate limit exceeded. Try again in $context`, `"message":"Rate limit reached. Try again in $context`},
		{"429 body code", `"code":"TOO_MANY_REQUESTS"`, `"code":"RATE_LIMITED"`},
		{"429 body wait in seconds only", `$context.authorizer.retryIn.`, `$context.authorizer.retryAfter seconds.`},
		{"header name in Go's canonical form", "              RateLimit-Policy: context.authorizer.policy", "              Ratelimit-Policy: context.authorizer.policy"},
		{"header name misspelt", "X-RateLimit-Remaining: context", "X-Rate-Limit-Remaining: context"},
		{"header from the wrong key", "X-RateLimit-Reset: context.authorizer.resetAt", "X-RateLimit-Reset: context.authorizer.reset"},
		{"429 without Retry-After", "              Retry-After: context.authorizer.retryAfter\n", ""},
		{"429 without Cache-Control", "              X-RateLimit-Reset: context.authorizer.resetAt\n              Cache-Control: \"'no-store'\"\n", "              X-RateLimit-Reset: context.authorizer.resetAt\n"},
		{"429 status", `StatusCode: "429"`, `StatusCode: "403"`},
		{"401 body", `"message":"The API key or bearer token is not valid."`, `"message":"Invalid credentials."`},
		{"503 Retry-After", "Retry-After: \"'1'\"", "Retry-After: \"'5'\""},
		{"503 body", `Rate limiting is temporarily unavailable. Try again in 1 second.`, `Rate limiting is unavailable. Try again in 1 second.`},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			mutated := strings.Replace(tpl, m.old, m.new, 1)
			if mutated == tpl {
				t.Fatalf("the mutation does not apply: %q is not in template.yaml", m.old)
			}
			if problems := contractGatewayProblems([]byte(mutated)); len(problems) == 0 {
				t.Errorf("template.yaml with %s: no difference found", m.name)
			}
		})
	}
}

// contractVariableNames are the environment variables the functions'
// code reads, collected from its string literals, and the stage variables
// (tplStageVariables). The test harnesses (redistest, lambdatest) are not
// functions.
func contractVariableNames(t *testing.T) []string {
	t.Helper()
	literal := regexp.MustCompile(`"((?:RATE_LIMIT|REDIS|JWT|API_KEYS?|HTTP_API)_[A-Z0-9_]+|LOG_LEVEL|AWS_LAMBDA_LOG_LEVEL)"`)
	names := map[string]bool{}
	for _, dir := range []string{"../internal", "../pkg", "../functions"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "redistest" || d.Name() == "lambdatest" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			for _, m := range literal.FindAllSubmatch(b, -1) {
				names[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			t.Fatalf("read sources: %v", err)
		}
	}
	if len(names) < 20 {
		t.Fatalf("found only %d variable names in the code: the scan is broken", len(names))
	}
	return append(tplSortedKeys(names), tplStageVariables(t)...)
}

// contractConfigurationTable is the "## Configuration" section of the
// contract page.
func contractConfigurationTable(doc string) string {
	_, rest, _ := strings.Cut(doc, "\n## Configuration\n")
	section, _, _ := strings.Cut(rest, "\n## ")
	var rows []string
	for line := range strings.SplitSeq(section, "\n") {
		if strings.HasPrefix(line, "| `") {
			rows = append(rows, line)
		}
	}
	return strings.Join(rows, "\n")
}

// contractMissing lists the names the configuration table does not name
// in a row's first two cells (variable, stage variable) or whose row gives
// no default.
func contractMissing(table string, names []string) []string {
	var missing []string
	for _, name := range names {
		found := false
		for row := range strings.SplitSeq(table, "\n") {
			cells := strings.Split(row, "|")
			if len(cells) < 5 {
				continue
			}
			if strings.Contains(cells[1]+cells[2], "`"+name+"`") && strings.TrimSpace(cells[3]) != "" {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, name)
		}
	}
	return missing
}

// TestContractListsEveryVariable: every environment and stage variable the
// functions read has a row, with its default, in docs/contract.md's
// configuration table; and the check notices a row that goes missing.
func TestContractListsEveryVariable(t *testing.T) {
	raw, err := os.ReadFile(contractPath)
	if err != nil {
		t.Fatal(err)
	}
	table := contractConfigurationTable(string(raw))
	names := contractVariableNames(t)
	for _, name := range contractMissing(table, names) {
		t.Errorf("docs/contract.md's configuration table has no row (with a default) for %s, which the functions read", name)
	}
	for _, name := range []string{"REDIS_TLS_CA_FILE", "rateLimitQuota"} {
		if !slices.Contains(names, name) {
			t.Fatalf("the scan of the code missed %s", name)
		}
		var kept []string
		for row := range strings.SplitSeq(table, "\n") {
			if !strings.Contains(row, "`"+name+"`") {
				kept = append(kept, row)
			}
		}
		if got := contractMissing(strings.Join(kept, "\n"), names); !slices.Contains(got, name) {
			t.Errorf("without its row, %s is still reported as listed", name)
		}
	}
}

// TestContractPageMatchesCode: the bodies and header names the contract
// page spells are the ones the code sends.
func TestContractPageMatchesCode(t *testing.T) {
	raw, err := os.ReadFile(contractPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	// N and <wait> stand for the seconds and their words in the page.
	placeholders := func(body []byte, n int64) string {
		s := strings.Replace(string(body), contract.RetryPhrase(n), "<wait>", 1)
		return strings.Replace(s, `"retry_after_seconds":`+strconv.FormatInt(n, 10)+`}`, `"retry_after_seconds":N}`, 1)
	}
	_, _, unauthorized := contractMiddlewareAnswer(apigw.Outcome{
		Kind:   apigw.Unauthorized,
		Result: ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{{Limit: ratelimit.Limit{Name: "anonymous", Count: 1, Window: time.Second}, Allowed: true}}},
	}, nil)
	_, _, internal := contractMiddlewareAnswer(apigw.Outcome{}, errors.New("some failure"))
	bodies := map[string]string{
		"429 with N":   placeholders(contract.TooManyRequestsBody(7), 7),
		"503 with N":   placeholders(contract.ServiceUnavailableBody(7), 7),
		"429 example":  string(contract.TooManyRequestsBody(18)),
		"401":          unauthorized,
		"500":          internal,
		"content type": contract.ContentTypeJSON,
	}
	for what, body := range bodies {
		if !strings.Contains(doc, "`"+body+"`") && !strings.Contains(doc, "\n"+body+"\n") {
			t.Errorf("docs/contract.md does not spell the %s body:\n  %s", what, body)
		}
	}
	// Every header the library writes on a denial, as the functions send it.
	written := http.Header{}
	httplimit.SetHeaders(written, ratelimit.Result{Decisions: []ratelimit.Decision{{
		Limit: ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}, RetryAfter: 18 * time.Second, ResetAfter: 18 * time.Second,
	}}})
	names := []string{"Cache-Control"}
	for name := range written {
		names = append(names, contract.SpecHeaderName(name))
	}
	if len(names) < 9 {
		t.Fatalf("SetHeaders wrote only %v", names)
	}
	for _, name := range names {
		if !strings.Contains(doc, "| `"+name+"` |") {
			t.Errorf("docs/contract.md's header table has no row for %s", name)
		}
	}
	for _, key := range []string{
		apigw.CtxTier, apigw.CtxLimit, apigw.CtxRemaining, apigw.CtxReset, apigw.CtxPolicy, apigw.CtxRateLimit, apigw.CtxName,
		apigw.CtxWindow, apigw.CtxResetAt, apigw.CtxRetryAfter, apigw.CtxRetryIn, apigw.CtxDegraded, apigw.CtxUnavailable,
		apigw.CtxBlocked, apigw.CtxUnlimited, apigw.CtxControl, apigw.CtxControlUntil, apigw.CtxControlFactor,
	} {
		if !strings.Contains(doc, "| `"+key+"` |") {
			t.Errorf("docs/contract.md's context key table has no row for %s", key)
		}
	}
}
