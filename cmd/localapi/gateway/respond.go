package gateway

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/slidegate/slidegate/internal/deployconfig"
)

// Gateway response types the local gateway produces, with API Gateway's
// own answer when template.yaml does not customize them.
const (
	ResponseMissingAuthToken  = "MISSING_AUTHENTICATION_TOKEN"
	ResponseUnauthorized      = "UNAUTHORIZED"
	ResponseAccessDenied      = "ACCESS_DENIED"
	ResponseAuthorizerFailure = "AUTHORIZER_FAILURE"
	ResponseAuthorizerConfig  = "AUTHORIZER_CONFIGURATION_ERROR"
	ResponseRequestTooLarge   = "REQUEST_TOO_LARGE"
)

// defaultResponse is API Gateway's answer for a response type that the
// template leaves alone.
type defaultResponse struct {
	status    int
	message   string
	errorType string
}

var defaultResponses = map[string]defaultResponse{
	ResponseMissingAuthToken:  {http.StatusForbidden, "Missing Authentication Token", "MissingAuthenticationTokenException"},
	ResponseUnauthorized:      {http.StatusUnauthorized, "Unauthorized", "UnauthorizedException"},
	ResponseAccessDenied:      {http.StatusForbidden, "User is not authorized to access this resource with an explicit deny", "AccessDeniedException"},
	ResponseAuthorizerFailure: {http.StatusInternalServerError, "", "AuthorizerFailureException"},
	ResponseAuthorizerConfig:  {http.StatusInternalServerError, "", "AuthorizerConfigurationException"},
	ResponseRequestTooLarge:   {http.StatusRequestEntityTooLarge, "Request Too Long", "RequestTooLargeException"},
}

// renderContext is what a gateway response's mappings can read.
type renderContext struct {
	requestID      string
	responseType   string
	authorizer     map[string]any
	stageVariables map[string]string
	requestHeaders http.Header
}

// writeGatewayResponse answers with the gateway response of typ: the
// template's status, headers and body when it customizes typ, else API
// Gateway's default. It returns the status written.
func writeGatewayResponse(s *Spec, w http.ResponseWriter, typ string, rc renderContext) int {
	def, known := defaultResponses[typ]
	if !known {
		def = defaultResponse{status: http.StatusInternalServerError, errorType: "InternalServerErrorException"}
	}
	rc.responseType = typ
	status := def.status
	message := def.message
	body := ""
	if message == "" {
		body = `{"message":null}`
	} else {
		body = `{"message":` + jsonString(message) + `}`
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("x-amzn-ErrorType", def.errorType)
	if gr, ok := s.Responses[typ]; ok {
		status = gr.StatusCode
		for name, expr := range gr.Headers {
			if v, ok := rc.mapping(expr, message); ok {
				setExact(h, name, v)
			}
		}
		if tpl, ok := gr.Templates["application/json"]; ok {
			body = rc.substitute(tpl, message)
		} else {
			for ct, tpl := range gr.Templates {
				h.Set("Content-Type", ct)
				body = rc.substitute(tpl, message)
				break
			}
		}
	}
	h.Set("Content-Length", itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
	return status
}

// mapping evaluates a header mapping expression: 'static',
// context.authorizer.<key>, stageVariables.<name> or
// method.request.header.<name>. ok is false when it has no value (API
// Gateway then leaves the header out).
func (rc renderContext) mapping(expr, message string) (string, bool) {
	switch {
	case len(expr) >= 2 && strings.HasPrefix(expr, "'") && strings.HasSuffix(expr, "'"):
		return expr[1 : len(expr)-1], true
	case strings.HasPrefix(expr, "method.request.header."):
		v := rc.requestHeaders.Get(strings.TrimPrefix(expr, "method.request.header."))
		return v, v != ""
	default:
		return rc.lookup(expr, message)
	}
}

// variable matches $name and ${name} of a gateway response template; the
// braces form never swallows a brace of the surrounding JSON.
var variable = regexp.MustCompile(`\$\{((?:context|stageVariables)(?:\.[A-Za-z0-9_]+)+)\}|\$((?:context|stageVariables)(?:\.[A-Za-z0-9_]+)+)`)

// substitute renders a gateway response body template: simple variable
// substitution, as API Gateway does (no VTL); a variable without a value
// becomes empty.
func (rc renderContext) substitute(tpl, message string) string {
	return variable.ReplaceAllStringFunc(tpl, func(m string) string {
		sub := variable.FindStringSubmatch(m)
		name := sub[1]
		if name == "" {
			name = sub[2]
		}
		v, _ := rc.lookup(name, message)
		return v
	})
}

func (rc renderContext) lookup(name, message string) (string, bool) {
	switch {
	case strings.HasPrefix(name, "context.authorizer."):
		v, ok := rc.authorizer[strings.TrimPrefix(name, "context.authorizer.")]
		if !ok || v == nil {
			return "", false
		}
		return deployconfig.Stringify(v), true
	case strings.HasPrefix(name, "stageVariables."):
		v, ok := rc.stageVariables[strings.TrimPrefix(name, "stageVariables.")]
		return v, ok
	case name == "context.requestId":
		return rc.requestID, true
	case name == "context.error.responseType":
		return rc.responseType, true
	case name == "context.error.message":
		return message, true
	case name == "context.error.messageString":
		return jsonString(message), true
	}
	return "", false
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
