// Package iamauth authenticates Redis connections to ElastiCache with IAM:
// it signs ElastiCache IAM authentication tokens and hands them to the Redis
// client, one for every new connection, signing a new one before the last
// expires.
//
// An IAM authentication token is a SigV4-presigned GET request for
//
//	http://<cache name>/?Action=connect&User=<user id>
//
// (with ResourceType=ServerlessCache added for a serverless cache), signed
// for the service "elasticache" in the cache's region with the caller's AWS
// credentials, valid for 15 minutes (X-Amz-Expires=900), with the "http://"
// removed. It is the password of the ElastiCache user <user id> (whose user
// name must equal its id) in HELLO or AUTH. ElastiCache checks it when a
// connection authenticates, not afterwards, but closes IAM-authenticated
// connections after 12 hours: clients retire theirs earlier
// (ConnMaxLifetime).
//
// The package knows AWS and hands pkg/ratelimit only a generic credentials
// callback and a connection lifetime (Provider.Configure).
package iamauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	// SigningName is the service name tokens are signed for.
	SigningName = "elasticache"

	// TokenLifetime is how long ElastiCache accepts a token after the time
	// it was signed at (its X-Amz-Expires).
	TokenLifetime = 15 * time.Minute

	// RefreshAfter is how old a kept token may grow before Provider signs
	// a new one. The third of its life left covers clock skew between this
	// host and AWS (SigV4 tolerates five minutes) and connections that are
	// slow to authenticate.
	RefreshAfter = 10 * time.Minute

	// ReuseUntil is how old a kept token may grow and still be handed out
	// while Provider fails to sign a new one (the credential source fails
	// or hangs): a minute before ElastiCache stops accepting it, ample for
	// a connection that authenticates right after asking, with clocks kept
	// by NTP as Lambda's are. Past it, new connections wait for a signing.
	ReuseUntil = 14 * time.Minute

	// ConnMaxLifetime is the age at which a client retires an
	// IAM-authenticated connection and opens a new one with a new token,
	// an hour before ElastiCache's 12-hour limit closes it mid-command.
	ConnMaxLifetime = 11 * time.Hour

	// emptyPayloadHash is the hex SHA-256 of the empty body of the GET
	// that a token presigns; it is the canonical request's payload hash, as
	// in AWS's own token generators (not UNSIGNED-PAYLOAD, which only S3
	// accepts).
	emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// Config names whom a token authenticates, on which cache.
type Config struct {
	// UserID is the ElastiCache user id; an IAM-enabled user's user name
	// is the same.
	UserID string
	// CacheName is the replication group id of a node-based cache, or the
	// name of a serverless cache, in lower case as ElastiCache keeps it:
	// the token's host.
	CacheName string
	// Serverless marks a serverless cache: its tokens carry
	// ResourceType=ServerlessCache.
	Serverless bool
	// Region is the cache's AWS region, e.g. "us-east-1".
	Region string
}

// validate checks what a token needs; the messages name the fields, not
// environment variables (internal/config checks those).
func (c Config) validate() error {
	var errs []error
	if c.UserID == "" {
		errs = append(errs, errors.New("no ElastiCache user id"))
	}
	if c.CacheName == "" {
		errs = append(errs, errors.New("no cache name"))
	} else if strings.ContainsAny(c.CacheName, "/?#@:[] ") {
		errs = append(errs, fmt.Errorf("cache name %q is not a host name", c.CacheName))
	}
	if c.Region == "" {
		errs = append(errs, errors.New("no AWS region"))
	}
	return errors.Join(errs...)
}

// Token signs an IAM authentication token for cfg with creds, as of
// signingTime: it is accepted from then until TokenLifetime later. The same
// arguments always give the same token.
func Token(ctx context.Context, cfg Config, creds aws.Credentials, signingTime time.Time) (string, error) {
	if err := cfg.validate(); err != nil {
		return "", fmt.Errorf("sign IAM auth token: %w", err)
	}
	if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
		return "", errors.New("sign IAM auth token: the AWS credentials have no access key")
	}
	query := url.Values{}
	query.Set("Action", "connect")
	query.Set("User", cfg.UserID)
	if cfg.Serverless {
		query.Set("ResourceType", "ServerlessCache")
	}
	query.Set("X-Amz-Expires", strconv.FormatInt(int64(TokenLifetime/time.Second), 10))
	target := url.URL{Scheme: "http", Host: cfg.CacheName, Path: "/", RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return "", fmt.Errorf("sign IAM auth token: build request: %w", err)
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, creds, req, emptyPayloadHash, SigningName, cfg.Region, signingTime)
	if err != nil {
		return "", fmt.Errorf("sign IAM auth token: %w", err)
	}
	token, ok := strings.CutPrefix(signed, "http://")
	if !ok {
		return "", fmt.Errorf("sign IAM auth token: presigned URL does not start with http://")
	}
	return token, nil
}
