package awsclients_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/slidegate/slidegate/internal/awsclients"
	"github.com/slidegate/slidegate/internal/awsclients/sdkconfig"
)

func envOf(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// lambdaEnv is what Lambda sets for a function's AWS SDK.
func lambdaEnv() map[string]string {
	return map[string]string{
		"AWS_REGION":            "eu-west-1",
		"AWS_DEFAULT_REGION":    "eu-west-1",
		"AWS_ACCESS_KEY_ID":     "ASIAFUNCTIONROLE",
		"AWS_SECRET_ACCESS_KEY": "function-role-secret",
		"AWS_SESSION_TOKEN":     "function-role-token",
	}
}

func TestFromEnvironmentReadsWhatLambdaSets(t *testing.T) {
	cfg, err := awsclients.FromEnvironment(envOf(lambdaEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AWS.Region != "eu-west-1" {
		t.Errorf("region %q", cfg.AWS.Region)
	}
	creds, err := cfg.AWS.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID != "ASIAFUNCTIONROLE" || creds.SecretAccessKey != "function-role-secret" || creds.SessionToken != "function-role-token" {
		t.Errorf("credentials %+v", creds)
	}
	if cfg.AWS.BaseEndpoint != nil || cfg.Endpoints != nil || cfg.FIPS || cfg.DualStack {
		t.Errorf("settings nobody set: %+v", cfg)
	}
}

func TestFromEnvironmentRefusesWhatItDoesNotRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  map[string]string
		drop []string
		want string // in the error; "" for none
	}{
		{"the other names of the keys", map[string]string{"AWS_ACCESS_KEY": "AKIDOTHER", "AWS_SECRET_KEY": "s", "AWS_REGION": "", "AWS_DEFAULT_REGION": "us-east-2"},
			[]string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, ""},
		{"a key id without its secret", nil, []string{"AWS_SECRET_ACCESS_KEY"}, "must be set together"},
		{"a profile and no keys", map[string]string{"AWS_PROFILE": "admin"}, []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, "AWS_PROFILE is set"},
		{"a web identity and no keys", map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": "/tmp/t", "AWS_ROLE_ARN": "arn:aws:iam::1:role/r"},
			[]string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, "AWS_WEB_IDENTITY_TOKEN_FILE is set"},
		{"a container endpoint and no keys", map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials"},
			[]string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, "AWS_CONTAINER_CREDENTIALS_FULL_URI is set"},
		// The keys come first, as in the SDK's default chain.
		{"a profile beside the keys", map[string]string{"AWS_PROFILE": "admin"}, nil, ""},
		{"a CA bundle that is not there", map[string]string{"AWS_CA_BUNDLE": "/nonexistent/ca.pem"}, nil, "AWS_CA_BUNDLE"},
		{"FIPS neither true nor false", map[string]string{"AWS_USE_FIPS_ENDPOINT": "yes"}, nil, "AWS_USE_FIPS_ENDPOINT"},
		{"attempts not a number", map[string]string{"AWS_MAX_ATTEMPTS": "three"}, nil, "AWS_MAX_ATTEMPTS"},
		{"no attempts", map[string]string{"AWS_MAX_ATTEMPTS": "0"}, nil, "AWS_MAX_ATTEMPTS"},
		{"an unknown retry mode", map[string]string{"AWS_RETRY_MODE": "eager"}, nil, "AWS_RETRY_MODE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := lambdaEnv()
			for k, v := range tc.set {
				env[k] = v
			}
			for _, k := range tc.drop {
				delete(env, k)
			}
			cfg, err := awsclients.FromEnvironment(envOf(env))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cfg.AWS.Credentials.Retrieve(context.Background()); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestFromEnvironmentWithoutCredentialsSaysSoWhenSigning(t *testing.T) {
	cfg, err := awsclients.FromEnvironment(envOf(map[string]string{"AWS_REGION": "eu-west-1"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = cfg.AWS.Credentials.Retrieve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no AWS credentials in the environment") {
		t.Fatalf("error %v", err)
	}
}

// errSent stops a call once its request is built and signed.
var errSent = errors.New("request captured")

// sent is what a client would have sent.
type sent struct {
	URL, KeyID string
	Attempts   int
}

// capture adds to a call a step that records its signed request and stops
// it there, before anything leaves the process.
func capture(got *sent) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("capture", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			req := in.Request.(*smithyhttp.Request)
			got.URL = req.URL.Scheme + "://" + req.URL.Host + req.URL.Path
			if _, after, ok := strings.Cut(req.Header.Get("Authorization"), "Credential="); ok {
				got.KeyID, _, _ = strings.Cut(after, "/")
			}
			return middleware.FinalizeOutput{}, middleware.Metadata{}, errSent
		}), middleware.After)
	}
}

// sentBy returns what the Secrets Manager and API Gateway clients of
// load would send.
func sentBy(t *testing.T, load awsclients.Loader) (secrets, gateway sent) {
	t.Helper()
	ctx := context.Background()
	c := awsclients.New(load, nil, nil)
	sc, err := c.SecretsManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("hash-key")}, func(o *secretsmanager.Options) {
		o.APIOptions = append(o.APIOptions, capture(&secrets))
		secrets.Attempts = o.Retryer.MaxAttempts()
	})
	if !errors.Is(err, errSent) {
		t.Fatalf("Secrets Manager: %v", err)
	}
	gc, err := c.APIGateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = gc.GetApiKeys(ctx, &apigateway.GetApiKeysInput{}, func(o *apigateway.Options) {
		o.APIOptions = append(o.APIOptions, capture(&gateway))
		gateway.Attempts = o.Retryer.MaxAttempts()
	})
	if !errors.Is(err, errSent) {
		t.Fatalf("API Gateway: %v", err)
	}
	return secrets, gateway
}

// TestFromEnvironmentSendsWhereTheSDKsLoaderSends compares, for the
// settings FromEnvironment reads, the requests its clients build with
// those of the SDK's full default loader (config.LoadDefaultConfig, as
// the functions used before): same endpoint, same signing key, same
// attempts.
func TestFromEnvironmentSendsWhereTheSDKsLoaderSends(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  map[string]string
	}{
		{"Lambda's own", nil},
		{"an endpoint for every service", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}},
		{"one service's endpoint", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:5001"}},
		{"the other service's endpoint", map[string]string{"AWS_ENDPOINT_URL_API_GATEWAY": "http://127.0.0.1:5002"}},
		{"endpoints ignored", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_ENDPOINT_URL_API_GATEWAY": "http://127.0.0.1:5002", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}},
		{"FIPS", map[string]string{"AWS_USE_FIPS_ENDPOINT": "true", "AWS_REGION": "us-east-1"}},
		{"dual-stack", map[string]string{"AWS_USE_DUALSTACK_ENDPOINT": "TRUE"}},
		{"FIPS and dual-stack off", map[string]string{"AWS_USE_FIPS_ENDPOINT": "false", "AWS_USE_DUALSTACK_ENDPOINT": "false"}},
		{"the default region only", map[string]string{"AWS_REGION": "", "AWS_DEFAULT_REGION": "ap-southeast-2"}},
		{"attempts", map[string]string{"AWS_MAX_ATTEMPTS": "5"}},
		{"adaptive retries", map[string]string{"AWS_RETRY_MODE": "adaptive", "AWS_MAX_ATTEMPTS": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// No shared files of the machine's user; no instance metadata.
			t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
			t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
			for _, name := range []string{"AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_ENDPOINT_URL_API_GATEWAY",
				"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"} {
				t.Setenv(name, "")
				os.Unsetenv(name)
			}
			env := lambdaEnv()
			for k, v := range tc.set {
				env[k] = v
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			ours, ourGateway := sentBy(t, nil)
			sdks, sdkGateway := sentBy(t, sdkconfig.Load)
			if ours != sdks {
				t.Errorf("Secrets Manager: FromEnvironment's client sends %+v, the SDK loader's %+v", ours, sdks)
			}
			if ourGateway != sdkGateway {
				t.Errorf("API Gateway: FromEnvironment's client sends %+v, the SDK loader's %+v", ourGateway, sdkGateway)
			}
			if ours.KeyID != "ASIAFUNCTIONROLE" {
				t.Errorf("signed with %q", ours.KeyID)
			}
		})
	}
}

// TestFunctionsLinkNoDefaultLoader keeps the SDK's default configuration
// loader, and the credential sources' service clients it brings, out of
// every build of the Lambda functions: their package initialisation runs
// on every cold start (FromEnvironment says why).
func TestFunctionsLinkNoDefaultLoader(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	banned := []string{
		"github.com/aws/aws-sdk-go-v2/config",
		"github.com/aws/aws-sdk-go-v2/service/sts",
		"github.com/aws/aws-sdk-go-v2/service/sso",
		"github.com/aws/aws-sdk-go-v2/service/ssooidc",
		"github.com/aws/aws-sdk-go-v2/service/signin",
	}
	for _, tags := range []string{"lambda.norpc", "lambda.norpc noxray", "lambda.norpc otel"} {
		out, err := exec.Command(goTool, "list", "-deps", "-tags", tags, "../../functions/...").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %q: %v\n%s", tags, err, out)
		}
		deps := map[string]bool{}
		for _, line := range strings.Fields(string(out)) {
			deps[line] = true
		}
		if !deps["github.com/aws/aws-sdk-go-v2/service/secretsmanager"] {
			t.Fatalf("-tags %q: the functions do not link the Secrets Manager client; is the list right?", tags)
		}
		for _, pkg := range banned {
			if deps[pkg] {
				t.Errorf("-tags %q: the functions link %s", tags, pkg)
			}
		}
	}
}

// TestFromEnvironmentTrustsTheCABundle calls a TLS endpoint whose
// certificate only AWS_CA_BUNDLE vouches for: refused without the bundle,
// answered with it.
func TestFromEnvironmentTrustsTheCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{"ARN":"arn:aws:secretsmanager:eu-west-1:1:secret:k","Name":"k","SecretString":"from-the-tls-endpoint"}`))
	}))
	defer srv.Close()
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func(caBundle string) (string, error) {
		env := lambdaEnv()
		env["AWS_ENDPOINT_URL"] = srv.URL
		env["AWS_MAX_ATTEMPTS"] = "1"
		env["AWS_CA_BUNDLE"] = caBundle
		load := func(context.Context) (awsclients.Config, error) { return awsclients.FromEnvironment(envOf(env)) }
		return awsclients.New(load, nil, nil).ReadSecret(context.Background(), "k")
	}
	if _, err := read(""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the bundle: %v, want a certificate error", err)
	}
	got, err := read(bundle)
	if err != nil || got != "from-the-tls-endpoint" {
		t.Fatalf("with the bundle: %q, %v", got, err)
	}
	if _, err := read(filepath.Join(t.TempDir(), "missing.pem")); err == nil || !strings.Contains(err.Error(), "AWS_CA_BUNDLE") {
		t.Fatalf("a missing bundle: %v", err)
	}
}
