// Package awsclients builds the AWS SDK clients a slidegate process needs,
// only when it needs them: Secrets Manager reads, the API Gateway key
// listing, and the credentials that sign ElastiCache IAM authentication
// tokens for Redis. A function's configuration comes from its environment
// (FromEnvironment), an operator's command's from the SDK's full loader
// (package sdkconfig). The functions' runtime
// (internal/instance) and the operator's tool (internal/operator) share it, so
// both reach Redis and read secrets the same way.
package awsclients

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/iamauth"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// SecretReader reads Secrets Manager secrets: *secretsmanager.Client.
type SecretReader interface {
	GetSecretValue(ctx context.Context, params *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SecretReadTimeout bounds one GetSecretValue call, the SDK's retries
// included.
const SecretReadTimeout = 3 * time.Second

// secretRetryMaxBackoff caps the SDK's pause between attempts of
// GetSecretValue (20 s by default, with jitter), so that a throttled or
// failing Secrets Manager uses up the SDK's three attempts, and reports why
// they failed, well within SecretReadTimeout instead of being cut short by
// it mid-pause with only "context deadline exceeded" to show.
const secretRetryMaxBackoff = 250 * time.Millisecond

// Clients builds the AWS SDK clients a process needs, only when it needs
// them, from the configuration its Loader returns (by default the
// function's environment: FromEnvironment, e.g. AWS_ENDPOINT_URL_API_GATEWAY
// and AWS_ENDPOINT_URL_SECRETS_MANAGER to point it at a local endpoint).
// It is safe for concurrent use: the cold-start loads run in parallel.
type Clients struct {
	mu         sync.Mutex
	load       Loader
	loaded     bool
	cfg        Config
	apiGateway identity.GatewayAPI
	secrets    SecretReader
}

func (c *Clients) configLocked(ctx context.Context) (Config, error) {
	if c.loaded {
		return c.cfg, nil
	}
	cfg, err := c.load(ctx)
	if err != nil {
		return Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	c.cfg, c.loaded = cfg, true
	return cfg, nil
}

// New returns the clients of a process: apiGateway and secrets when given
// (a test's, say), else built when first needed from the configuration
// load returns, or, when load is nil, from the process's environment
// (FromEnvironment).
func New(load Loader, apiGateway identity.GatewayAPI, secrets SecretReader) *Clients {
	if load == nil {
		load = func(context.Context) (Config, error) { return FromEnvironment(os.Getenv) }
	}
	return &Clients{load: load, apiGateway: apiGateway, secrets: secrets}
}

// APIGateway returns the API Gateway client that lists API keys and usage
// plans.
func (c *Clients) APIGateway(ctx context.Context) (identity.GatewayAPI, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiGateway == nil {
		cfg, err := c.configLocked(ctx)
		if err != nil {
			return nil, err
		}
		c.apiGateway = gatewayCalls{api: apigateway.NewFromConfig(cfg.AWS, func(o *apigateway.Options) {
			cfg.applyTo(serviceAPIGateway, &o.BaseEndpoint, &o.EndpointOptions.UseFIPSEndpoint, &o.EndpointOptions.UseDualStackEndpoint)
		}), region: cfg.AWS.Region}
	}
	return c.apiGateway, nil
}

// SecretsManager returns the Secrets Manager client that reads secrets.
func (c *Clients) SecretsManager(ctx context.Context) (SecretReader, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.secrets == nil {
		cfg, err := c.configLocked(ctx)
		if err != nil {
			return nil, err
		}
		c.secrets = secretsmanager.NewFromConfig(cfg.AWS, func(o *secretsmanager.Options) {
			cfg.applyTo(serviceSecretsManager, &o.BaseEndpoint, &o.EndpointOptions.UseFIPSEndpoint, &o.EndpointOptions.UseDualStackEndpoint)
		})
	}
	return c.secrets, nil
}

// Credentials returns the credentials and region of the process's AWS
// configuration (in Lambda, the function role's credentials and the
// function's region), for signing ElastiCache IAM authentication tokens.
func (c *Clients) Credentials(ctx context.Context) (aws.CredentialsProvider, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg, err := c.configLocked(ctx)
	if err != nil {
		return nil, "", err
	}
	if cfg.AWS.Credentials == nil {
		return nil, "", errors.New("load AWS configuration: no credentials provider")
	}
	return cfg.AWS.Credentials, cfg.AWS.Region, nil
}

// ReadSecret returns a secret's SecretString, waiting at most
// SecretReadTimeout (less when ctx ends sooner).
func (c *Clients) ReadSecret(ctx context.Context, arn string) (string, error) {
	client, err := c.SecretsManager(ctx)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, SecretReadTimeout)
	defer cancel()
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)},
		func(o *secretsmanager.Options) {
			if o.Retryer != nil {
				o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, secretRetryMaxBackoff)
			}
		})
	if err != nil {
		c.mu.Lock()
		region := c.cfg.AWS.Region
		c.mu.Unlock()
		return "", fmt.Errorf("read secret %s: %w", arn, unreachable(serviceSecretsManager, region, err))
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("read secret %s: no SecretString", arn)
	}
	return *out.SecretString, nil
}

// RedisIAM returns cc set up to authenticate every new connection as
// iam.User with an ElastiCache IAM authentication token signed with the
// process's AWS configuration's credentials, and that configuration's region.
// logger receives the token provider's own records.
func (c *Clients) RedisIAM(ctx context.Context, cc redisclient.Config, iam config.RedisIAM, logger *slog.Logger) (redisclient.Config, string, error) {
	creds, region, err := c.Credentials(ctx)
	if err != nil {
		return cc, "", fmt.Errorf("no AWS credentials to sign IAM auth tokens with: %w", err)
	}
	provider, err := iamauth.NewProvider(iamauth.Config{
		UserID:     iam.User,
		CacheName:  iam.CacheName,
		Serverless: iam.Serverless,
		Region:     region,
	}, creds, iamauth.Options{Logger: logger})
	if err != nil {
		return cc, "", fmt.Errorf("IAM authentication cannot be set up (is AWS_REGION set?): %w", err)
	}
	return provider.Configure(cc), region, nil
}
