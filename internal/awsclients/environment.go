package awsclients

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Config is what a process's AWS clients are built from: the SDK's
// configuration, and the per-service settings that FromEnvironment reads
// itself (the SDK's default loader puts them in Config.AWS.ConfigSources,
// where the service clients find them on their own).
type Config struct {
	// AWS is the SDK's configuration: region, credentials, retries and the
	// endpoint of every service (AWS_ENDPOINT_URL).
	AWS aws.Config
	// Endpoints are the base endpoints of single services, by the name
	// their AWS_ENDPOINT_URL_<NAME> variable gives them: "SECRETS_MANAGER",
	// "API_GATEWAY".
	Endpoints map[string]string
	// FIPS and DualStack select the services' FIPS and dual-stack
	// endpoints (AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT).
	FIPS, DualStack bool
}

// Loader returns a process's AWS configuration. It is called once, when a
// client is first needed.
type Loader func(ctx context.Context) (Config, error)

// The environment names of the services the clients call.
const (
	serviceSecretsManager = "SECRETS_MANAGER"
	serviceAPIGateway     = "API_GATEWAY"
)

// credentialSources are the environment's settings that name a source of
// credentials other than the environment's own keys. FromEnvironment
// reads none of them: with no keys in the environment, a setting of one
// is refused, so that a function never runs on credentials other than
// the ones its configuration names.
var credentialSources = []string{
	"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
}

// FromEnvironment returns the AWS configuration of a Lambda function: the
// one its environment gives, read from getenv alone, as the SDK's
// default loader (config.LoadDefaultConfig) reads the same variables.
//
// Why not the default loader: it links every source of credentials the
// SDK knows (profiles, SSO, IAM Identity Center, STS role chains, the
// instance metadata service) and their service clients, whose package
// initialisation runs on every cold start whether or not they are used:
// about 3 ms of the TRACER=none authorizer's 9 to 10 ms (make bench, cold
// start). In Lambda the function's credentials are always in the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN), and so are its region and any endpoint override.
//
// Read: AWS_REGION (or AWS_DEFAULT_REGION); AWS_ACCESS_KEY_ID (or
// AWS_ACCESS_KEY), AWS_SECRET_ACCESS_KEY (or AWS_SECRET_KEY) and
// AWS_SESSION_TOKEN; AWS_CA_BUNDLE; AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_SECRETS_MANAGER and AWS_ENDPOINT_URL_API_GATEWAY, unless
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true; AWS_USE_FIPS_ENDPOINT and
// AWS_USE_DUALSTACK_ENDPOINT; AWS_MAX_ATTEMPTS and AWS_RETRY_MODE.
//
// Refused with an error, never silently ignored: a setting that would
// change where credentials come from (a profile, a role, a container
// credentials endpoint, with no keys in the environment), and a value that
// does not parse. With no credentials at all, the configuration loads and
// every signed call fails with an error saying so. The commands an
// operator runs on their own machine use the SDK's full loader instead
// (package sdkconfig).
func FromEnvironment(getenv func(string) string) (Config, error) {
	var cfg Config
	var errs []error
	cfg.AWS.Region = firstSet(getenv, "AWS_REGION", "AWS_DEFAULT_REGION")

	id := firstSet(getenv, "AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY")
	secret := firstSet(getenv, "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")
	switch {
	case id != "" && secret != "":
		creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: getenv("AWS_SESSION_TOKEN"),
			Source: "EnvConfigCredentials"}
		cfg.AWS.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil })
	case id != "" || secret != "":
		errs = append(errs, errors.New("AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together"))
	default:
		for _, name := range credentialSources {
			if getenv(name) != "" {
				errs = append(errs, fmt.Errorf("AWS credentials: %s is set, but the functions read credentials only from the environment's keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), as Lambda sets them", name))
			}
		}
		cfg.AWS.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
		})
	}
	if path := getenv("AWS_CA_BUNDLE"); path != "" {
		client, err := trusting(path)
		errs = append(errs, err)
		cfg.AWS.HTTPClient = client
	}

	ignore, err := envBool(getenv, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
	errs = append(errs, err)
	if !ignore {
		if u := getenv("AWS_ENDPOINT_URL"); u != "" {
			cfg.AWS.BaseEndpoint = aws.String(u)
		}
		for _, service := range []string{serviceSecretsManager, serviceAPIGateway} {
			if u := getenv("AWS_ENDPOINT_URL_" + service); u != "" {
				if cfg.Endpoints == nil {
					cfg.Endpoints = map[string]string{}
				}
				cfg.Endpoints[service] = u
			}
		}
	}
	cfg.FIPS, err = envBool(getenv, "AWS_USE_FIPS_ENDPOINT")
	errs = append(errs, err)
	cfg.DualStack, err = envBool(getenv, "AWS_USE_DUALSTACK_ENDPOINT")
	errs = append(errs, err)

	if v := getenv("AWS_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("AWS_MAX_ATTEMPTS=%q: want a whole number of at least 1", v))
		}
		cfg.AWS.RetryMaxAttempts = n
	}
	if v := getenv("AWS_RETRY_MODE"); v != "" {
		mode, err := aws.ParseRetryMode(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("AWS_RETRY_MODE: %w", err))
		}
		cfg.AWS.RetryMode = mode
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// trusting returns an HTTP client for the SDK that trusts the certificate
// authorities of the PEM file at path, and only those, as the SDK's
// default loader does with AWS_CA_BUNDLE.
func trusting(path string) (*awshttp.BuildableClient, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("AWS_CA_BUNDLE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("AWS_CA_BUNDLE: %s holds no PEM certificate", path)
	}
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = pool
	}), nil
}

// firstSet returns the value of the first of names that is set.
func firstSet(getenv func(string) string, names ...string) string {
	for _, name := range names {
		if v := getenv(name); v != "" {
			return v
		}
	}
	return ""
}

// envBool reads a true/false setting as the SDK does (either case); unset
// is false.
func envBool(getenv func(string) string, name string) (bool, error) {
	switch v := getenv(name); strings.ToLower(v) {
	case "":
		return false, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
}

// applyTo sets a service client's options from c: the service's own
// endpoint, and the FIPS and dual-stack endpoints when selected. It leaves
// alone what c does not set, which the SDK's full loader resolves itself.
func (c Config) applyTo(service string, base **string, fips *aws.FIPSEndpointState, dual *aws.DualStackEndpointState) {
	if u, ok := c.Endpoints[service]; ok {
		*base = aws.String(u)
	}
	if c.FIPS {
		*fips = aws.FIPSEndpointStateEnabled
	}
	if c.DualStack {
		*dual = aws.DualStackEndpointStateEnabled
	}
}
