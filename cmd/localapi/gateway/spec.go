// Package gateway is a local API Gateway for slidegate's SAM app: it serves
// one stage of template.yaml, as internal/deployconfig reads it (routes,
// the stage's variables, the authorizer's identity sources, gateway
// responses), the way API Gateway would, turning each request into the
// real Lambda events, invoking the authorizer and the API function
// in-process through their Lambda entry points (JSON in, JSON out), and
// applying the authorizer's answer and the gateway responses. It is what
// `make local` runs; `sam local start-api` cannot run a Lambda authorizer's
// gateway responses nor stage variables.
package gateway

import "github.com/slidegate/slidegate/internal/deployconfig"

// Spec is the template stage a Gateway serves.
type Spec = deployconfig.Spec

// Route is one API event of a function in template.yaml.
type Route = deployconfig.Route

// GatewayResponse is one entry of the REST API's GatewayResponses.
type GatewayResponse = deployconfig.GatewayResponse
