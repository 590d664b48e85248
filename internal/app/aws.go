package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/slidegate/slidegate/internal/identity"
)

// secretReadTimeout bounds one GetSecretValue call, the SDK's retries
// included.
const secretReadTimeout = 3 * time.Second

// secretRetryMaxBackoff caps the SDK's pause between attempts of
// GetSecretValue (20 s by default, with jitter), so that a throttled or
// failing Secrets Manager uses up the SDK's three attempts, and reports why
// they failed, well within secretReadTimeout instead of being cut short by
// it mid-pause with only "context deadline exceeded" to show.
const secretRetryMaxBackoff = 250 * time.Millisecond

// awsClients builds the AWS SDK clients a runtime needs, only when it needs
// them, from the default configuration (environment, Lambda role). The
// SDK's own environment variables apply, e.g. AWS_ENDPOINT_URL_API_GATEWAY
// and AWS_ENDPOINT_URL_SECRETS_MANAGER to point it at a local endpoint. It
// is safe for concurrent use: the cold-start loads run in parallel.
type awsClients struct {
	mu         sync.Mutex
	loaded     bool
	cfg        aws.Config
	apiGateway identity.GatewayAPI
	secrets    SecretReader
}

func (c *awsClients) configLocked(ctx context.Context) (aws.Config, error) {
	if c.loaded {
		return c.cfg, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	c.cfg, c.loaded = cfg, true
	return cfg, nil
}

func (c *awsClients) apiGatewayClient(ctx context.Context) (identity.GatewayAPI, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiGateway == nil {
		cfg, err := c.configLocked(ctx)
		if err != nil {
			return nil, err
		}
		c.apiGateway = apigateway.NewFromConfig(cfg)
	}
	return c.apiGateway, nil
}

func (c *awsClients) secretsClient(ctx context.Context) (SecretReader, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.secrets == nil {
		cfg, err := c.configLocked(ctx)
		if err != nil {
			return nil, err
		}
		c.secrets = secretsmanager.NewFromConfig(cfg)
	}
	return c.secrets, nil
}

// credentials returns the credentials and region of the default AWS
// configuration (in Lambda, the function role's credentials and the
// function's region), for signing ElastiCache IAM authentication tokens.
// The provider caches the credentials and renews them before they expire.
func (c *awsClients) credentials(ctx context.Context) (aws.CredentialsProvider, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg, err := c.configLocked(ctx)
	if err != nil {
		return nil, "", err
	}
	if cfg.Credentials == nil {
		return nil, "", errors.New("load AWS configuration: no credentials provider")
	}
	return cfg.Credentials, cfg.Region, nil
}

// readSecret returns a secret's SecretString, waiting at most
// secretReadTimeout (less when ctx ends sooner).
func (c *awsClients) readSecret(ctx context.Context, arn string) (string, error) {
	client, err := c.secretsClient(ctx)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, secretReadTimeout)
	defer cancel()
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)},
		func(o *secretsmanager.Options) {
			if o.Retryer != nil {
				o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, secretRetryMaxBackoff)
			}
		})
	if errors.Is(err, context.DeadlineExceeded) {
		// Most often a function in a VPC with no route to Secrets Manager.
		return "", fmt.Errorf("read secret %s: no answer from Secrets Manager in time (at most %s; does the VPC have a NAT gateway or a secretsmanager endpoint?): %w", arn, secretReadTimeout, err)
	}
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", arn, err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("read secret %s: no SecretString", arn)
	}
	return *out.SecretString, nil
}
