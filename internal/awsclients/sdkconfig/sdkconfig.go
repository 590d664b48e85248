// Package sdkconfig loads the AWS SDK's full default configuration, for
// the processes an operator runs on their own machine (the slidegate
// command, make local): shared config and credentials files, profiles,
// IAM Identity Center, role chains. The Lambda functions do not import
// it: its credential sources' packages cost every cold start about 3 ms
// of package initialisation (awsclients.FromEnvironment says why).
package sdkconfig

import (
	"context"
	"fmt"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/slidegate/slidegate/internal/awsclients"
)

// Load is an awsclients.Loader: config.LoadDefaultConfig, whose
// configuration carries the per-service endpoint, FIPS and dual-stack
// settings in its sources, where the service clients read them.
func Load(ctx context.Context) (awsclients.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return awsclients.Config{}, fmt.Errorf("the AWS SDK's default configuration: %w", err)
	}
	return awsclients.Config{AWS: cfg}, nil
}
