package mototest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	gwtypes "github.com/aws/aws-sdk-go-v2/service/apigateway/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
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
	if err != nil {
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
	if err != nil {
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
	if err != nil {
		t.Fatalf("PutSecretValue %s: %v", secretID, err)
	}
}
