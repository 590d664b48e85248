package iamauth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// refreshTimeout bounds one signing, credential retrieval included, for
// the provider as a whole. Each caller waits at most until its own context
// ends (the decision's budget), which is usually far sooner; a signing it
// gave up on goes on, so that the next connection finds a token.
const refreshTimeout = 10 * time.Second

// Options configure a Provider. The zero value is production.
type Options struct {
	// Now is the clock tokens are signed with and aged by; time.Now when
	// nil. Tests step it to move a token past RefreshAfter or expiry.
	Now func() time.Time
}

// Provider hands out IAM authentication tokens for new Redis connections.
// It signs a token when first asked, hands out that token while it is
// younger than RefreshAfter, and then signs a new one, so a connection
// always authenticates with a token that has at least five of its fifteen
// minutes left. Concurrent callers share one signing. It is safe for
// concurrent use.
type Provider struct {
	cfg   Config
	creds aws.CredentialsProvider
	now   func() time.Time

	mu       sync.Mutex
	token    string    // the kept token; "" before the first signing
	signedAt time.Time // when token was signed, by now
	signing  *signing  // the signing under way, if any
}

// signing is one signing that callers wait for; its results are set before
// done is closed.
type signing struct {
	done  chan struct{}
	token string
	err   error
}

// NewProvider returns a Provider of tokens for cfg, signed with the
// credentials creds gives (the Lambda role's, from the default AWS
// configuration, in production; creds caches and renews them). It does not
// sign anything yet. The error reports an incomplete cfg or no creds.
func NewProvider(cfg Config, creds aws.CredentialsProvider, opts Options) (*Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new IAM auth provider: %w", err)
	}
	if creds == nil {
		return nil, errors.New("new IAM auth provider: no AWS credentials provider")
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{cfg: cfg, creds: creds, now: now}, nil
}

// Credentials returns the user name and IAM authentication token a new
// connection authenticates with, in the shape of go-redis's
// CredentialsProviderContext. It returns the kept token while it is
// younger than RefreshAfter; otherwise it signs a new one (retrieving the
// AWS credentials first), or waits for the signing another caller started.
// It waits at most until ctx is done: a credential source that hangs costs
// the caller its context's deadline, not more. Errors name the user and
// what failed, never the token or the credentials.
func (p *Provider) Credentials(ctx context.Context) (username, password string, err error) {
	p.mu.Lock()
	if age := p.now().Sub(p.signedAt); p.token != "" && age >= 0 && age < RefreshAfter {
		token := p.token
		p.mu.Unlock()
		return p.cfg.UserID, token, nil
	}
	s := p.signing
	if s == nil {
		s = &signing{done: make(chan struct{})}
		p.signing = s
		go p.sign(context.WithoutCancel(ctx), s)
	}
	p.mu.Unlock()

	select {
	case <-s.done:
		if s.err != nil {
			return "", "", fmt.Errorf("IAM auth for ElastiCache user %s: %w", p.cfg.UserID, s.err)
		}
		return p.cfg.UserID, s.token, nil
	case <-ctx.Done():
		return "", "", fmt.Errorf("IAM auth for ElastiCache user %s: waiting for a token: %w", p.cfg.UserID, context.Cause(ctx))
	}
}

// sign retrieves the credentials, signs a token as of now, keeps it if it
// was signed, and ends s.
func (p *Provider) sign(ctx context.Context, s *signing) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	var token string
	var signedAt time.Time
	creds, err := p.creds.Retrieve(ctx)
	if err != nil {
		err = fmt.Errorf("retrieve AWS credentials: %w", err)
	} else {
		signedAt = p.now()
		token, err = Token(ctx, p.cfg, creds, signedAt)
	}
	p.mu.Lock()
	if err == nil {
		p.token, p.signedAt = token, signedAt
	}
	s.token, s.err = token, err
	p.signing = nil
	p.mu.Unlock()
	close(s.done)
}

// Configure returns cc set up for IAM authentication: every new connection
// authenticates with the provider's token as Config.UserID (Password and
// the URL's credentials are not used), and connections are retired after
// ConnMaxLifetime, before ElastiCache's 12-hour limit.
func (p *Provider) Configure(cc ratelimit.ClientConfig) ratelimit.ClientConfig {
	cc.Password = ""
	cc.CredentialsProvider = p.Credentials
	cc.ConnMaxLifetime = ConnMaxLifetime
	return cc
}
