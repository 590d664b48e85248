package mototest

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Gateway is the API Gateway of an empty account on the shared
// moto_server, filled through the SDK with the keys and usage plans of a
// test, and the proxy in front of it that the code under test calls: it
// cuts moto's one-page listings into pages of two items, so that the SDK's
// paginators have to follow positions; holds requests while its Gate is
// held; and records the requests.
type Gateway struct {
	*Proxy
	t       testing.TB
	account *Account
	// keyIDs maps a test's key id to moto's; planIDs a test's plan id to
	// moto's, and plans lists moto's in the test's order.
	keyIDs, planIDs map[string]string
	plans           []string
}

// APIKey is an API key a test puts in a Gateway.
type APIKey struct {
	ID      string
	Name    string
	Value   string // at least 20 characters, as API Gateway requires
	Enabled bool
}

// UsagePlan is a usage plan with the API stages of Stages ("apiId" for
// the stage prod of that API, or "apiId/stage") and the keys of KeyIDs
// attached.
type UsagePlan struct {
	ID     string
	Stages []string
	KeyIDs []string
}

// NewGateway fills a new account of the shared server and returns it with
// the proxy's URL.
func NewGateway(t testing.TB, keys []APIKey, plans []UsagePlan) (*Gateway, string) {
	t.Helper()
	moto := Shared(t)
	account := moto.Account(t)
	proxy := moto.Proxy(t, account)
	proxy.SetPageSize(2)
	gw := &Gateway{Proxy: proxy, t: t, account: account,
		keyIDs: map[string]string{}, planIDs: map[string]string{}}
	for _, k := range keys {
		gw.keyIDs[k.ID] = account.CreateAPIKey(t, k.Value, k.Enabled)
	}
	for _, p := range plans {
		var stages []Stage
		for _, st := range p.Stages {
			api, stage, ok := strings.Cut(st, "/")
			if !ok {
				stage = "prod"
			}
			stages = append(stages, Stage{APIID: api, Stage: stage})
		}
		id := account.CreateUsagePlan(t, "plan "+p.ID, nil, stages...)
		gw.planIDs[p.ID] = id
		gw.plans = append(gw.plans, id)
		for _, k := range p.KeyIDs {
			account.AttachAPIKey(t, id, gw.keyIDs[k])
		}
	}
	return gw, proxy.Account.Endpoint
}

// AddKey creates an enabled key and attaches it to the plan-th usage plan.
func (g *Gateway) AddKey(k APIKey, plan int) {
	g.keyIDs[k.ID] = g.account.CreateAPIKey(g.t, k.Value, true)
	g.account.AttachAPIKey(g.t, g.plans[plan], g.keyIDs[k.ID])
}

// Client is the real SDK client of the account, through the proxy.
func (g *Gateway) Client() *apigateway.Client {
	return apigateway.NewFromConfig(g.Account.Config)
}

// Env points a process's SDK at the account, through the proxy.
func (g *Gateway) Env() map[string]string {
	env := g.Account.Env()
	delete(env, "AWS_ENDPOINT_URL")
	env["AWS_ENDPOINT_URL_API_GATEWAY"] = g.Account.Endpoint
	return env
}

// RequestsTo returns the requests seen so far for path (exact, or a prefix
// when it ends with "*"), in which a test's usage plan id stands for moto's.
func (g *Gateway) RequestsTo(path string) []*http.Request {
	for test, moto := range g.planIDs {
		path = strings.Replace(path, "/usageplans/"+test+"/", "/usageplans/"+moto+"/", 1)
	}
	var out []*http.Request
	for _, r := range g.Requests() {
		if r.URL.Path == path || (strings.HasSuffix(path, "*") && strings.HasPrefix(r.URL.Path, strings.TrimSuffix(path, "*"))) {
			out = append(out, r)
		}
	}
	return out
}

// Secrets is the Secrets Manager of an empty account on the shared
// moto_server, filled through the SDK (CreateSecret), and the proxy in
// front of it that the code under test calls. moto answers GetSecretValue
// itself, ResourceNotFoundException for a secret it does not have included;
// the proxy adds what moto never does: throttling (ThrottlingException, as
// Secrets Manager answers past its request rate) and no answer at all (a
// held request), and counts the calls.
type Secrets struct {
	*Proxy
	t       testing.TB
	account *Account
	// arns maps the ARN a test names a secret by to moto's ARN of it.
	arns map[string]string

	mu      sync.Mutex
	release func()
}

// NewSecrets creates each secret of secrets (a test's ARN -> its
// SecretString) in a new account of the shared server, named after the
// ARN's last part.
func NewSecrets(t testing.TB, secrets map[string]string) *Secrets {
	t.Helper()
	moto := Shared(t)
	account := moto.Account(t)
	f := &Secrets{Proxy: moto.Proxy(t, account), t: t, account: account, arns: map[string]string{}}
	for arn, value := range secrets {
		f.arns[arn] = account.CreateSecret(t, arn[strings.LastIndex(arn, ":")+1:], value)
	}
	t.Cleanup(f.Answer)
	return f
}

// ARN is moto's ARN of the secret a test calls testARN, or testARN itself
// for a secret that was not created (which moto does not find).
func (f *Secrets) ARN(testARN string) string {
	if arn, ok := f.arns[testARN]; ok {
		return arn
	}
	return testARN
}

// Throttle makes every GetSecretValue fail with ThrottlingException.
func (f *Secrets) Throttle() {
	f.Fail(func(op string) *Fault {
		if op == "GetSecretValue" {
			return &Fault{Status: http.StatusBadRequest, Type: "ThrottlingException", Message: "Rate exceeded"}
		}
		return nil
	})
}

// Hang holds every request: Secrets Manager does not answer.
func (f *Secrets) Hang() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release == nil {
		f.release = f.Hold()
	}
}

// Answer makes the endpoint answer from now on: no throttling, no hang.
func (f *Secrets) Answer() {
	f.Fail(nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release != nil {
		f.release()
		f.release = nil
	}
}

// GetSecretValueCalls is the number of GetSecretValue calls so far.
func (f *Secrets) GetSecretValueCalls() int { return int(f.Calls("GetSecretValue")) }

// Client is an aws-sdk-go-v2 Secrets Manager client of the account, with
// the SDK's default retries, as the functions build it.
func (f *Secrets) Client() *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region:       f.Account.Region,
		BaseEndpoint: aws.String(f.Account.Endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDMOTOTEST", "moto-test-secret", ""),
	})
}

// Env points a process's AWS SDK at the account, through the proxy.
func (f *Secrets) Env() map[string]string {
	env := f.Account.Env()
	delete(env, "AWS_ENDPOINT_URL")
	env["AWS_ENDPOINT_URL_SECRETS_MANAGER"] = f.Account.Endpoint
	return env
}

// ExampleKeys are the keys of the account the functions' tests fill: the
// API of the test events in events/ (a1b2c3d4e5) has two usage plans on
// its stage prod and one on its stage dev (ExampleUsagePlans), another API
// has one. k3 is disabled; k7 is in no plan.
func ExampleKeys() []APIKey {
	return []APIKey{
		{ID: "k1", Name: "one", Value: "gw-key-page-1-a-padded", Enabled: true},
		{ID: "k2", Name: "two", Value: "gw-key-page-1-b-padded", Enabled: true},
		{ID: "k3", Name: "three", Value: "gw-key-disabled-padded", Enabled: false},
		{ID: "k4", Name: "four", Value: "gw-key-page-2-padded", Enabled: true},
		{ID: "k5", Name: "five", Value: "gw-key-page-3-padded", Enabled: true},
		{ID: "k6", Name: "six", Value: "gw-key-of-another-api-padded", Enabled: true},
		{ID: "k7", Name: "seven", Value: "gw-key-in-no-plan-padded", Enabled: true},
		{ID: "k9", Name: "nine", Value: "gw-key-dev-only-padded", Enabled: true},
	}
}

// ExampleUsagePlans are the usage plans of ExampleKeys.
func ExampleUsagePlans() []UsagePlan {
	return []UsagePlan{
		{ID: "p-other", Stages: []string{"zzzzzzzzzz"}, KeyIDs: []string{"k6"}},
		{ID: "p-gold", Stages: []string{"a1b2c3d4e5"}, KeyIDs: []string{"k1", "k2", "k3"}},
		{ID: "p-silver", Stages: []string{"zzzzzzzzzz", "a1b2c3d4e5"}, KeyIDs: []string{"k4", "k5"}},
		{ID: "p-dev", Stages: []string{"a1b2c3d4e5/dev"}, KeyIDs: []string{"k9"}},
	}
}
