package instance_test

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestIdentityLoadsOnFirstUse: NewRuntime does not wait for what only
// requests with credentials need. With API Gateway and the JWKS host
// hanging and a long cold-start budget, it returns at once, a request
// without credentials is decided at once, and a request with an API key
// waits for the key listing (within the budget) and is counted as the
// key's tier once it arrives, not as anonymous.
func TestIdentityLoadsOnFirstUse(t *testing.T) {
	srv := redistest.StartServer(t)
	gw, _ := mototest.NewGateway(t, mototest.ExampleKeys(), mototest.ExampleUsagePlans())
	jwks := startIDJWKS(t)
	releaseGateway, releaseJWKS := gw.Gate.Hold(), jwks.gate.Hold()
	defer releaseGateway()
	defer releaseJWKS()

	// Far beyond the wait below: a NewRuntime that waited for the held
	// loads would not return in time.
	const budget = 2 * time.Minute
	built := make(chan *instance.Runtime, 1)
	go func() {
		rt, _ := idRuntime(t, idEnv(srv.URL(), jwks.url), instance.Options{
			APIGateway:      gw.Client(),
			ColdStartBudget: budget,
		})
		built <- rt
	}()
	var rt *instance.Runtime
	select {
	case rt = <-built:
	case <-time.After(20 * time.Second):
		t.Fatal("NewRuntime waited for the API key listing and the JWKS, which only requests with credentials need")
	}
	gw.Gate.Entered()
	jwks.gate.Entered()
	if o := idDecide(t, rt, nil); o.Caller.Tier != identity.TierAnonymous || !o.Result.Allowed {
		t.Errorf("request without credentials while the keys load: %+v, want an anonymous Allow", o)
	}

	decided := make(chan apigw.Outcome, 1)
	go func() { decided <- idDecide(t, rt, map[string]string{"x-api-key": "gw-key-page-1-a-padded"}) }()
	// A decision that did not wait would be answered (anonymous) well
	// within this pause; one that waits is answered after the release.
	time.Sleep(200 * time.Millisecond)
	releaseGateway()
	if o := <-decided; o.Caller.Tier != identity.TierOrg || o.Caller.APIKey != "gw-key-page-1-a-padded" {
		t.Errorf("first request with an API key: %+v, want org: it must wait for the listing in flight", o)
	}
	releaseJWKS()
}
