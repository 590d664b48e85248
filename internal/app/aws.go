package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// secretReadTimeout bounds one GetSecretValue call.
const secretReadTimeout = 3 * time.Second

// awsClients builds the AWS SDK clients a runtime needs, only when it needs
// them, from the default configuration (environment, Lambda role). The
// SDK's own environment variables apply, e.g. AWS_ENDPOINT_URL_API_GATEWAY
// and AWS_ENDPOINT_URL_SECRETS_MANAGER to point it at a local endpoint. It
// is safe for concurrent use: the cold-start loads run in parallel.
type awsClients struct {
	mu         sync.Mutex
	loaded     bool
	cfg        aws.Config
	apiGateway APIGatewayClient
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

func (c *awsClients) apiGatewayClient(ctx context.Context) (APIGatewayClient, error) {
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

// readSecret returns a secret's SecretString, waiting at most
// secretReadTimeout (less when ctx ends sooner).
func (c *awsClients) readSecret(ctx context.Context, arn string) (string, error) {
	client, err := c.secretsClient(ctx)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, secretReadTimeout)
	defer cancel()
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", arn, err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("read secret %s: no SecretString", arn)
	}
	return *out.SecretString, nil
}
