package mototest

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	gwtypes "github.com/aws/aws-sdk-go-v2/service/apigateway/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
)

// Stage is one API stage of a usage plan.
type Stage struct {
	APIID, Stage string
}

// APIGateway fills the account's API Gateway through the SDK.
func (a *Account) APIGateway() *apigateway.Client { return apigateway.NewFromConfig(a.Config) }

// SecretsManager fills the account's Secrets Manager through the SDK.
func (a *Account) SecretsManager() *secretsmanager.Client {
	return secretsmanager.NewFromConfig(a.Config)
}

// CreateAPIKey creates an API key of the value, enabled or not, and returns
// its id (CreateApiKey).
func (a *Account) CreateAPIKey(t testing.TB, value string, enabled bool) string {
	t.Helper()
	out, err := a.APIGateway().CreateApiKey(fillContext(t), &apigateway.CreateApiKeyInput{
		Name: aws.String("key-" + value), Value: aws.String(value), Enabled: enabled,
	})
	if answeredUnread(err) {
		return a.apiKeyID(t, "key-"+value)
	}
	if err != nil {
		t.Fatalf("CreateApiKey %q: %v", value, err)
	}
	return aws.ToString(out.Id)
}

// DisableAPIKey disables the key of the id (UpdateApiKey).
func (a *Account) DisableAPIKey(t testing.TB, id string) {
	t.Helper()
	_, err := a.APIGateway().UpdateApiKey(fillContext(t), &apigateway.UpdateApiKeyInput{
		ApiKey: aws.String(id),
		PatchOperations: []gwtypes.PatchOperation{
			{Op: gwtypes.OpReplace, Path: aws.String("/enabled"), Value: aws.String("false")},
		},
	})
	if err != nil && !answeredUnread(err) {
		t.Fatalf("UpdateApiKey %s enabled=false: %v", id, err)
	}
}

// CreateUsagePlan creates a usage plan of the name, API stages and tags and
// returns its id (CreateUsagePlan).
func (a *Account) CreateUsagePlan(t testing.TB, name string, tags map[string]string, stages ...Stage) string {
	t.Helper()
	in := &apigateway.CreateUsagePlanInput{Name: aws.String(name), Tags: tags}
	for _, s := range stages {
		in.ApiStages = append(in.ApiStages, gwtypes.ApiStage{ApiId: aws.String(s.APIID), Stage: aws.String(s.Stage)})
	}
	out, err := a.APIGateway().CreateUsagePlan(fillContext(t), in)
	if answeredUnread(err) {
		return a.usagePlanID(t, name)
	}
	if err != nil {
		t.Fatalf("CreateUsagePlan %q: %v", name, err)
	}
	return aws.ToString(out.Id)
}

// AttachAPIKey adds the key of keyID to the usage plan of planID
// (CreateUsagePlanKey).
func (a *Account) AttachAPIKey(t testing.TB, planID, keyID string) {
	t.Helper()
	_, err := a.APIGateway().CreateUsagePlanKey(fillContext(t), &apigateway.CreateUsagePlanKeyInput{
		UsagePlanId: aws.String(planID), KeyId: aws.String(keyID), KeyType: aws.String("API_KEY"),
	})
	if err != nil && !answeredUnread(err) {
		t.Fatalf("CreateUsagePlanKey %s %s: %v", planID, keyID, err)
	}
}

// CreateSecret creates a secret of the name whose SecretString is value, and
// returns its ARN (CreateSecret).
func (a *Account) CreateSecret(t testing.TB, name, value string) string {
	t.Helper()
	out, err := a.SecretsManager().CreateSecret(fillContext(t), &secretsmanager.CreateSecretInput{
		Name: aws.String(name), SecretString: aws.String(value),
	})
	if answeredUnread(err) {
		d, derr := a.SecretsManager().DescribeSecret(fillContext(t), &secretsmanager.DescribeSecretInput{SecretId: aws.String(name)})
		if derr != nil {
			t.Fatalf("CreateSecret %q: %v; then DescribeSecret: %v", name, err, derr)
		}
		return aws.ToString(d.ARN)
	}
	if err != nil {
		t.Fatalf("CreateSecret %q: %v", name, err)
	}
	return aws.ToString(out.ARN)
}

// PutSecretValue makes value the secret's current SecretString, as a
// rotation does (PutSecretValue).
func (a *Account) PutSecretValue(t testing.TB, secretID, value string) {
	t.Helper()
	_, err := a.SecretsManager().PutSecretValue(fillContext(t), &secretsmanager.PutSecretValueInput{
		SecretId: aws.String(secretID), SecretString: aws.String(value),
	})
	if err != nil && !answeredUnread(err) {
		t.Fatalf("PutSecretValue %s: %v", secretID, err)
	}
}

// answeredUnread reports whether err is a call moto_server answered with
// success whose body the client then failed to read (seen under load:
// "deserialization failed ... use of closed network connection" after a
// 201): the change was made, only its reply was lost. A fill helper then
// carries on, looking up what it created where it needs an id, instead of
// failing the test over its own set-up.
func answeredUnread(err error) bool {
	var de *smithy.DeserializationError
	var re *awshttp.ResponseError
	return errors.As(err, &de) && errors.As(err, &re) && re.HTTPStatusCode() >= 200 && re.HTTPStatusCode() < 300
}

// apiKeyID is the id of the account's one API key of the name, for a
// CreateApiKey whose reply was lost.
func (a *Account) apiKeyID(t testing.TB, name string) string {
	t.Helper()
	out, err := a.APIGateway().GetApiKeys(fillContext(t), &apigateway.GetApiKeysInput{NameQuery: aws.String(name), Limit: aws.Int32(500)})
	if err != nil {
		t.Fatalf("GetApiKeys %q after a lost CreateApiKey reply: %v", name, err)
	}
	for _, k := range out.Items {
		if aws.ToString(k.Name) == name {
			return aws.ToString(k.Id)
		}
	}
	t.Fatalf("CreateApiKey %q answered, and no key of that name is listed", name)
	return ""
}

// usagePlanID is the id of the account's usage plan of the name, for a
// CreateUsagePlan whose reply was lost.
func (a *Account) usagePlanID(t testing.TB, name string) string {
	t.Helper()
	pages := apigateway.NewGetUsagePlansPaginator(a.APIGateway(), &apigateway.GetUsagePlansInput{})
	for pages.HasMorePages() {
		out, err := pages.NextPage(fillContext(t))
		if err != nil {
			t.Fatalf("GetUsagePlans after a lost CreateUsagePlan reply: %v", err)
		}
		for _, p := range out.Items {
			if aws.ToString(p.Name) == name {
				return aws.ToString(p.Id)
			}
		}
	}
	t.Fatalf("CreateUsagePlan %q answered, and no plan of that name is listed", name)
	return ""
}
