package app

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// awsClients builds the AWS SDK clients a runtime needs, only when it needs
// them, from the default configuration (environment, Lambda role). The
// SDK's own environment variables apply, e.g. AWS_ENDPOINT_URL_API_GATEWAY
// and AWS_ENDPOINT_URL_SECRETS_MANAGER to point it at a local endpoint.
type awsClients struct {
	loaded     bool
	cfg        aws.Config
	apiGateway APIKeyLister
	secrets    SecretReader
}

func (c *awsClients) config(ctx context.Context) (aws.Config, error) {
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

func (c *awsClients) apiGatewayClient(ctx context.Context) (APIKeyLister, error) {
	if c.apiGateway == nil {
		cfg, err := c.config(ctx)
		if err != nil {
			return nil, err
		}
		c.apiGateway = apigateway.NewFromConfig(cfg)
	}
	return c.apiGateway, nil
}

// readSecret returns a secret's SecretString.
func (c *awsClients) readSecret(ctx context.Context, arn string) (string, error) {
	if c.secrets == nil {
		cfg, err := c.config(ctx)
		if err != nil {
			return "", err
		}
		c.secrets = secretsmanager.NewFromConfig(cfg)
	}
	ctx, cancel := context.WithTimeout(ctx, coldStartAWSBudget)
	defer cancel()
	out, err := c.secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", arn, err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("read secret %s: no SecretString", arn)
	}
	return *out.SecretString, nil
}
