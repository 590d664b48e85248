package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Invoker runs a Lambda function in-process the way Lambda does: a JSON
// event in, a JSON result out, or the function's error.
type Invoker func(ctx context.Context, event []byte) ([]byte, error)

// Options configure a Gateway.
type Options struct {
	// Spec is the template stage to serve. Required.
	Spec *Spec
	// HTTPAPI serves the HTTP API (v2 events, simple-response authorizer)
	// instead of the REST API.
	HTTPAPI bool
	// Authorizer invokes the authorizer function. Required when the spec
	// has an authorizer.
	Authorizer Invoker
	// Functions invoke the API's functions by logical ID.
	Functions map[string]Invoker
	// Logger receives one record per request; slog.Default() when nil.
	Logger *slog.Logger
}

// Identifiers of the local API in events and ARNs.
const (
	localAccountID = "123456789012"
	localRegion    = "us-east-1"
	localAPIID     = "localapi"
	// maxBody is API Gateway's payload limit (10 MB).
	maxBody = 10 << 20
)

// errUnauthorized is the message of an authorizer error that API Gateway
// answers 401.
const errUnauthorized = "Unauthorized"

// Gateway serves HTTP requests as API Gateway would serve them to the
// template's functions. It is safe for concurrent use.
type Gateway struct {
	spec       *Spec
	httpAPI    bool
	authorizer Invoker
	functions  map[string]Invoker
	logger     *slog.Logger
	// httpFunction is the function of the HTTP API's $default route.
	httpFunction string
}

// New returns a Gateway for opts.
func New(opts Options) (*Gateway, error) {
	if opts.Spec == nil {
		return nil, errors.New("new gateway: no spec")
	}
	if opts.Spec.HasAuthorizer && opts.Authorizer == nil {
		return nil, errors.New("new gateway: the template has an authorizer but no Authorizer invoker was given")
	}
	g := &Gateway{
		spec:       opts.Spec,
		httpAPI:    opts.HTTPAPI,
		authorizer: opts.Authorizer,
		functions:  opts.Functions,
		logger:     opts.Logger,
	}
	if g.logger == nil {
		g.logger = slog.Default()
	}
	for _, r := range opts.Spec.Routes {
		if _, ok := opts.Functions[r.Function]; !ok {
			return nil, fmt.Errorf("new gateway: route %s %s: no invoker for function %s", r.Method, r.Resource, r.Function)
		}
		if g.httpFunction == "" || r.Function == "ApiFunction" {
			g.httpFunction = r.Function
		}
	}
	return g, nil
}

// exchange is one request's trace for its log line.
type exchange struct {
	requestID string
	sourceIP  string
	status    int
	// verdict is what the authorizer answered: Allow, Deny, Unauthorized,
	// error, invalid, or empty when it did not run.
	verdict string
	// responseType is the gateway response used, if any.
	responseType string
}

// ServeHTTP answers one request and logs one line about it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ex := &exchange{requestID: newRequestID(), sourceIP: peerHost(r.RemoteAddr)}
	w.Header().Set("x-amzn-RequestId", ex.requestID)
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		ex.status = http.StatusBadRequest
		http.Error(w, "read request body", http.StatusBadRequest)
	case len(body) > maxBody:
		ex.responseType = ResponseRequestTooLarge
		ex.status = writeGatewayResponse(g.spec, w, ResponseRequestTooLarge, g.renderContext(ex, r, nil))
	case g.httpAPI:
		g.serveHTTPAPI(w, r, body, ex)
	default:
		g.serveREST(w, r, body, ex)
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", ex.status),
		slog.Float64("ms", float64(time.Since(start).Microseconds())/1000),
		slog.String("source_ip", ex.sourceIP),
		slog.String("request_id", ex.requestID),
	}
	if ex.verdict != "" {
		attrs = append(attrs, slog.String("authorizer", ex.verdict))
	}
	if ex.responseType != "" {
		attrs = append(attrs, slog.String("gateway_response", ex.responseType))
	}
	g.logger.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

func (g *Gateway) renderContext(ex *exchange, r *http.Request, authorizer map[string]any) renderContext {
	vars := g.spec.StageVariables
	if g.httpAPI {
		vars = g.spec.HTTPStageVariables
	}
	return renderContext{requestID: ex.requestID, authorizer: authorizer, stageVariables: vars, requestHeaders: r.Header}
}

func (g *Gateway) gatewayResponse(w http.ResponseWriter, r *http.Request, ex *exchange, typ string, authorizer map[string]any) {
	ex.responseType = typ
	ex.status = writeGatewayResponse(g.spec, w, typ, g.renderContext(ex, r, authorizer))
}

// plainError is an HTTP API's own error answer ({"message":"..."}), which
// HTTP APIs do not let a template customize.
func plainError(w http.ResponseWriter, ex *exchange, status int, message string) {
	body := `{"message":` + jsonString(message) + `}`
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	ex.status = status
}

// invoke runs a function with a JSON event.
func invoke(ctx context.Context, fn Invoker, event any) ([]byte, error) {
	payload, err := json.Marshal(event)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return fn(ctx, payload)
}

// writeProxyResponse writes a function's proxy response.
func writeProxyResponse(w http.ResponseWriter, ex *exchange, status int, headers map[string]string, multi map[string][]string, cookies []string, body string, base64Encoded bool) {
	h := w.Header()
	for k, v := range headers {
		setExact(h, k, v)
	}
	for k, vs := range multi {
		setExact(h, k, vs...)
	}
	for _, c := range cookies {
		h.Add("Set-Cookie", c)
	}
	raw := []byte(body)
	if base64Encoded {
		decoded, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			plainError(w, ex, http.StatusBadGateway, "Internal server error")
			return
		}
		raw = decoded
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", itoa(len(raw)))
	w.WriteHeader(status)
	_, _ = w.Write(raw)
	ex.status = status
}

// requestBody is a proxy event's body: as is when it is UTF-8 text, base64
// otherwise (as API Gateway does for binary payloads).
func requestBody(body []byte) (string, bool) {
	if utf8.Valid(body) {
		return string(body), false
	}
	return base64.StdEncoding.EncodeToString(body), true
}

func peerHost(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	s := hex.EncodeToString(b[:])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

func itoa(n int) string { return strconv.Itoa(n) }

// methodARN is the execute-api ARN of a request, as an authorizer sees it.
func methodARN(stage, method, path string) string {
	return "arn:aws:execute-api:" + localRegion + ":" + localAccountID + ":" + localAPIID + "/" + stage + "/" + method + "/" + strings.TrimPrefix(path, "/")
}

// setExact sets a response header under the name exactly as the function
// or the template spells it (RateLimit-Policy), as API Gateway does, where
// http.Header.Set would write Go's canonical form (Ratelimit-Policy). Any
// other spelling of the name is removed first.
func setExact(h http.Header, name string, values ...string) {
	h.Del(name)
	delete(h, name)
	h[name] = values
}
