package mototest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit/holdgate"
)

// Proxy stands between a test's AWS clients and moto_server, for what moto
// does not do:
//   - pages: moto answers an API Gateway listing (GetApiKeys, GetUsagePlans,
//     GetUsagePlanKeys) in one page whatever its limit; with PageSize set,
//     the proxy cuts moto's answer into pages as API Gateway does ("item",
//     and "position" for the next page), so that the SDK's paginators follow
//     positions;
//   - faults: moto never throttles or fails; Fail makes chosen calls fail
//     with an AWS error;
//   - counts: moto does not say how often it was called;
//   - holds: the embedded Gate holds requests until the test releases them.
//
// Everything else is moto's answer, unchanged.
type Proxy struct {
	*holdgate.Gate
	// Account talks to moto through the proxy, in the region of the
	// account it was made for.
	Account *Account

	target   *url.URL
	proxy    *httputil.ReverseProxy
	pageSize atomic.Int64

	mu       sync.Mutex
	fail     func(op string) *Fault
	calls    map[string]int64
	requests []*http.Request
	// listings counts first pages of GetApiKeys: listings started.
	listings atomic.Int64
}

// Fault is an AWS error answer.
type Fault struct {
	// Status is the HTTP status, e.g. 429 or 400.
	Status int
	// Type is the AWS error code, e.g. TooManyRequestsException.
	Type string
	// Message is the error's message.
	Message string
}

// Proxy returns a proxy in front of the account's moto_server, closed when t
// finishes; its Account is a's region seen through it.
func (s *Server) Proxy(t testing.TB, a *Account) *Proxy {
	t.Helper()
	target, err := url.Parse(s.url)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{Gate: holdgate.New(), target: target, calls: map[string]int64{}}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		// A client that gave up (a test's deadline) is no error to log.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeFault(w, &Fault{Status: http.StatusBadGateway, Type: "ProxyError", Message: err.Error()})
		},
	}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	p.Account = newAccount(a.Region, hs.URL)
	return p
}

// SetPageSize makes each page of an API Gateway listing at most n items (and
// at most the request's limit); 0 leaves moto's one page.
func (p *Proxy) SetPageSize(n int) { p.pageSize.Store(int64(n)) }

// Fail makes every call for which fail returns a Fault fail with it; op is
// the call's operation name (Operation). nil fails nothing.
func (p *Proxy) Fail(fail func(op string) *Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = fail
}

// Calls is the number of calls of the operation op that reached the proxy
// (failed and held ones included), "" for every call.
func (p *Proxy) Calls(op string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if op == "" {
		var n int64
		for _, c := range p.calls {
			n += c
		}
		return n
	}
	return p.calls[op]
}

// Requests returns the requests that reached the proxy so far, in order
// (their headers and URLs; their bodies are moto's).
func (p *Proxy) Requests() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Listings is the number of API key listings started: GetApiKeys calls for
// a first page.
func (p *Proxy) Listings() int64 { return p.listings.Load() }

// Operation names the AWS call r makes: the Secrets Manager action of its
// X-Amz-Target (GetSecretValue), or the API Gateway call of its method and
// path (GetApiKeys, GetUsagePlans, GetUsagePlanKeys), else METHOD PATH.
func Operation(r *http.Request) string {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		_, action, _ := strings.Cut(target, ".")
		return action
	}
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == "/apikeys":
		return "GetApiKeys"
	case r.Method == http.MethodGet && path == "/usageplans":
		return "GetUsagePlans"
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/usageplans/") && strings.HasSuffix(path, "/keys"):
		return "GetUsagePlanKeys"
	}
	return r.Method + " " + path
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Counted before the gate: a request held until its client gave up
	// was still made.
	op := Operation(r)
	p.mu.Lock()
	p.calls[op]++
	p.requests = append(p.requests, r.Clone(context.Background()))
	p.mu.Unlock()
	if op == "GetApiKeys" && r.URL.Query().Get("position") == "" {
		p.listings.Add(1)
	}
	if !p.Pass(r) {
		return
	}
	p.mu.Lock()
	fail := p.fail
	p.mu.Unlock()
	if fail != nil {
		if f := fail(op); f != nil {
			writeFault(w, f)
			return
		}
	}
	size := int(p.pageSize.Load())
	if size == 0 || !strings.HasPrefix(op, "Get") || r.Header.Get("X-Amz-Target") != "" {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.servePage(w, r, size)
}

// servePage asks moto for the whole listing and answers one page of it.
func (p *Proxy) servePage(w http.ResponseWriter, r *http.Request, size int) {
	q := r.URL.Query()
	pos, _ := strconv.Atoi(q.Get("position"))
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		size = min(size, n)
	}
	rec := httptest.NewRecorder()
	p.proxy.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		copyResponse(w, rec)
		return
	}
	var whole struct {
		Item []json.RawMessage `json:"item"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &whole); err != nil {
		writeFault(w, &Fault{Status: http.StatusBadGateway, Type: "ProxyError", Message: fmt.Sprintf("moto's listing: %v", err)})
		return
	}
	end := min(pos+size, len(whole.Item))
	page := map[string]any{"item": []json.RawMessage{}}
	if pos < end {
		page["item"] = whole.Item[pos:end]
	}
	if end < len(whole.Item) {
		page["position"] = strconv.Itoa(end)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = io.Copy(w, bytes.NewReader(rec.Body.Bytes()))
}

// writeFault answers f the way both API Gateway (X-Amzn-Errortype) and
// Secrets Manager (__type) report errors.
func writeFault(w http.ResponseWriter, f *Fault) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", f.Type)
	w.WriteHeader(f.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": f.Type, "message": f.Message})
}
