package tests

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/slidegate/slidegate/internal/testkit/mototest"
)

// smFixture is the Secrets Manager of an empty account on the shared
// moto_server, filled through the SDK (CreateSecret), and the proxy in
// front of it that the code under test calls. moto answers GetSecretValue
// itself, ResourceNotFoundException for a secret it does not have included;
// the proxy adds what moto never does: throttling (ThrottlingException, as
// Secrets Manager answers past its request rate) and no answer at all (a
// held request), and counts the calls.
type smFixture struct {
	*mototest.Proxy
	t       *testing.T
	account *mototest.Account
	// arns maps the ARN a test names a secret by to moto's ARN of it.
	arns map[string]string

	mu      sync.Mutex
	release func()
}

// startSecrets creates each secret of secrets (a test's ARN -> its
// SecretString) in a new account, named after the ARN's last part.
func startSecrets(t *testing.T, secrets map[string]string) *smFixture {
	t.Helper()
	moto := mototest.Shared(t)
	account := moto.Account(t)
	f := &smFixture{Proxy: moto.Proxy(t, account), t: t, account: account, arns: map[string]string{}}
	for arn, value := range secrets {
		f.arns[arn] = account.CreateSecret(t, arn[strings.LastIndex(arn, ":")+1:], value)
	}
	t.Cleanup(f.answer)
	return f
}

// arn is moto's ARN of the secret a test calls testARN, or testARN itself
// for a secret that was not created (which moto does not find).
func (f *smFixture) arn(testARN string) string {
	if arn, ok := f.arns[testARN]; ok {
		return arn
	}
	return testARN
}

// throttle makes every GetSecretValue fail with ThrottlingException.
func (f *smFixture) throttle() {
	f.Fail(func(op string) *mototest.Fault {
		if op == "GetSecretValue" {
			return &mototest.Fault{Status: http.StatusBadRequest, Type: "ThrottlingException", Message: "Rate exceeded"}
		}
		return nil
	})
}

// hang holds every request: Secrets Manager does not answer.
func (f *smFixture) hang() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release == nil {
		f.release = f.Hold()
	}
}

// answer makes the endpoint answer from now on: no throttling, no hang.
func (f *smFixture) answer() {
	f.Fail(nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release != nil {
		f.release()
		f.release = nil
	}
}

// requests is the number of GetSecretValue calls so far.
func (f *smFixture) requests() int { return int(f.Calls("GetSecretValue")) }

// client is an aws-sdk-go-v2 Secrets Manager client of the account, with
// the SDK's default retries, as the functions build it.
func (f *smFixture) client() *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region:       f.Account.Region,
		BaseEndpoint: aws.String(f.Account.Endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDMOTOTEST", "moto-test-secret", ""),
	})
}

// env points a process's AWS SDK at the account, through the proxy.
func (f *smFixture) env() map[string]string {
	env := f.Account.Env()
	delete(env, "AWS_ENDPOINT_URL")
	env["AWS_ENDPOINT_URL_SECRETS_MANAGER"] = f.Account.Endpoint
	return env
}

// withEnv returns env with more's entries added (more wins).
func withEnv(env, more map[string]string) map[string]string {
	out := make(map[string]string, len(env)+len(more))
	for k, v := range env {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}
