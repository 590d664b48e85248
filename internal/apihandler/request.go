package apihandler

import (
	"net"
	"net/http"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/slidegate/slidegate/internal/apigw"
)

// readRequest reads what r tells slidegate, once: the apigw.Request, and
// the authorizer's context (requestContext.authorizer for REST,
// requestContext.authorizer.lambda for an HTTP API) when API Gateway ran
// the slidegate authorizer before the function, else nil. The source
// address and stage variables come from the API Gateway event the proxy
// library put in r's context (REST or HTTP API), never from a header such
// as X-Forwarded-For, which any caller can write. A request served
// without an event (a local HTTP server) is counted by its TCP peer
// address.
func readRequest(r *http.Request) (req apigw.Request, authorizer map[string]any) {
	req = apigw.Request{
		Method: apigw.NormalMethod(r.Method),
		// As the router reads it: escaped, decoded by the matching
		// (policy.Path) exactly once.
		Path:            r.URL.EscapedPath(),
		Headers:         apigw.FoldHeaders(nil, r.Header),
		LambdaRequestID: apigw.LambdaRequestID(r.Context()),
	}
	if rc, ok := core.GetAPIGatewayContextFromContext(r.Context()); ok {
		req.RequestID = rc.RequestID
		req.SourceIP = rc.Identity.SourceIP
		// The path parameters are left out: this router routes on the
		// path it is given, base path and all.
		req.Path, req.ServedPaths = apigw.LimitPath(rc.ResourcePath, req.Path), apigw.ServedPaths(rc.ResourcePath, req.Path, nil)
		req.APIID = rc.APIID
		req.Stage = rc.Stage
		req.StageVariables, _ = core.GetStageVarsFromContext(r.Context())
		return req, rc.Authorizer
	}
	if rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok {
		req.RequestID = rc.RequestID
		req.RouteKey = rc.RouteKey
		req.SourceIP = rc.HTTP.SourceIP
		if rc.Authorizer != nil {
			authorizer = rc.Authorizer.Lambda
		}
		req.StageVariables, _ = core.GetStageVarsFromContextV2(r.Context())
		return req, authorizer
	}
	req.SourceIP = peerAddress(r.RemoteAddr)
	return req, nil
}

// peerAddress is the host of a "host:port" remote address, or the address
// itself when it has no port.
func peerAddress(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}
