package mototest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/slidegate/slidegate/internal/testkit/mototest"
)

// TestAccountsStartEmpty: two accounts of the shared server see nothing of
// each other, and what is filled is what the SDK reads back (a usage plan's
// stages and tags, a secret's current value after PutSecretValue).
func TestAccountsStartEmpty(t *testing.T) {
	moto := mototest.Shared(t)
	a, b := moto.Account(t), moto.Account(t)
	ctx := context.Background()
	key := a.CreateAPIKey(t, "mototest-key-0123456789", true)
	plan := a.CreateUsagePlan(t, "Pro Monthly", map[string]string{"slidegate:plan": "pro"}, mototest.Stage{APIID: "api1", Stage: "dev"})
	a.AttachAPIKey(t, plan, key)
	arn := a.CreateSecret(t, "mototest-secret", "first")
	a.PutSecretValue(t, arn, "second")

	plans, err := a.APIGateway().GetUsagePlans(ctx, &apigateway.GetUsagePlansInput{})
	if err != nil || len(plans.Items) != 1 {
		t.Fatalf("GetUsagePlans: %v, %d plans; want 1", err, len(plans.Items))
	}
	p := plans.Items[0]
	if p.Tags["slidegate:plan"] != "pro" || len(p.ApiStages) != 1 || aws.ToString(p.ApiStages[0].Stage) != "dev" {
		t.Errorf("usage plan read back as %+v", p)
	}
	secret, err := a.SecretsManager().GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil || aws.ToString(secret.SecretString) != "second" {
		t.Errorf("GetSecretValue after PutSecretValue: %v, %q; want second", err, aws.ToString(secret.SecretString))
	}
	keys, err := b.APIGateway().GetApiKeys(ctx, &apigateway.GetApiKeysInput{})
	if err != nil || len(keys.Items) != 0 {
		t.Errorf("another account's GetApiKeys: %v, %d keys; want none", err, len(keys.Items))
	}
}

// TestProxyPagesFailsAndCounts: through a Proxy with pages of one, the
// SDK's paginator reads every key one page at a time; Fail answers the
// chosen operation with the AWS error, which the SDK reports by its code.
func TestProxyPagesFailsAndCounts(t *testing.T) {
	moto := mototest.Shared(t)
	a := moto.Account(t)
	for _, v := range []string{"proxy-key-1-0123456789", "proxy-key-2-0123456789", "proxy-key-3-0123456789"} {
		a.CreateAPIKey(t, v, true)
	}
	p := moto.Proxy(t, a)
	p.SetPageSize(1)
	ctx := context.Background()
	client := apigateway.NewFromConfig(p.Account.Config)
	pages := apigateway.NewGetApiKeysPaginator(client, &apigateway.GetApiKeysInput{IncludeValues: aws.Bool(true)})
	var values []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page.Items {
			values = append(values, aws.ToString(k.Value))
		}
	}
	if len(values) != 3 || p.Calls("GetApiKeys") != 3 || p.Listings() != 1 {
		t.Errorf("read %q in %d calls, %d listings; want 3 keys in 3 pages of one listing", values, p.Calls("GetApiKeys"), p.Listings())
	}

	p.Fail(func(op string) *mototest.Fault {
		if op == "GetUsagePlans" {
			return &mototest.Fault{Status: http.StatusTooManyRequests, Type: "TooManyRequestsException", Message: "slow down"}
		}
		return nil
	})
	_, err := client.GetUsagePlans(ctx, &apigateway.GetUsagePlansInput{})
	if err == nil || !strings.Contains(err.Error(), "TooManyRequestsException: slow down") {
		t.Errorf("GetUsagePlans under Fail: %v, want TooManyRequestsException", err)
	}
}
