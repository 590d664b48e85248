package iamauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// refreshTimeout bounds one signing, credential retrieval included, for
// the provider as a whole. Each caller waits at most until its own context
// ends (the decision's budget), which is usually far sooner; a signing it
// gave up on goes on, so that the next connection finds a token.
const refreshTimeout = 10 * time.Second

// Options configure a Provider. The zero value is production.
type Options struct {
	// Now is the clock tokens are signed with and aged by; time.Now when
	// nil. Tests step it to move a token past RefreshAfter or ReuseUntil.
	Now func() time.Time
	// Logger receives a warning, naming the user and the cause (never the
	// token or the credentials), when a background signing fails while
	// the kept token is still handed out; nothing is logged when nil.
	Logger *slog.Logger
}

// Provider hands out IAM authentication tokens for new Redis connections.
//
// It signs a token when first asked and hands out that token while it is
// younger than RefreshAfter. From RefreshAfter until ReuseUntil it still
// hands out the kept token at once, and signs a new one in the background
// (one at a time; after a failed one, the next call starts another): a
// credential source that fails or hangs then costs no connection anything
// while the kept token is good. Past
// ReuseUntil (or before the first token, or when the clock went back)
// callers wait for a signing, each at most until its own context ends, and
// fail if it fails. Concurrent callers share one signing. It is safe for
// concurrent use.
type Provider struct {
	cfg    Config
	creds  aws.CredentialsProvider
	now    func() time.Time
	logger *slog.Logger

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
	return &Provider{cfg: cfg, creds: creds, now: now, logger: opts.Logger}, nil
}

// Credentials returns the user name and IAM authentication token a new
// connection authenticates with, in the shape of go-redis's
// CredentialsProviderContext.
//
// While the kept token is younger than RefreshAfter it is returned. While
// it is younger than ReuseUntil it is returned too, at once, and a
// background signing is started unless one is under way. Otherwise
// Credentials signs a new token (retrieving the AWS credentials first), or
// waits for the signing under way, at most until ctx is done: a credential
// source that hangs costs the caller its context's deadline, not more.
// Errors name the user and what failed, never the token or the
// credentials.
func (p *Provider) Credentials(ctx context.Context) (username, password string, err error) {
	p.mu.Lock()
	if age := p.now().Sub(p.signedAt); p.token != "" && age >= 0 && age < ReuseUntil {
		token := p.token
		if age >= RefreshAfter && p.signing == nil {
			p.startSigningLocked(ctx, true)
		}
		p.mu.Unlock()
		return p.cfg.UserID, token, nil
	}
	s := p.signing
	if s == nil {
		s = p.startSigningLocked(ctx, false)
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

// startSigningLocked starts a signing, detached from ctx's cancellation
// (a caller that stops waiting does not stop it), and makes it the one
// under way. background marks a signing nobody waits for, whose failure
// is logged.
func (p *Provider) startSigningLocked(ctx context.Context, background bool) *signing {
	s := &signing{done: make(chan struct{})}
	p.signing = s
	go p.sign(context.WithoutCancel(ctx), s, background)
	return s
}

// sign retrieves the credentials, signs a token as of now, keeps it if it
// was signed, and ends s.
func (p *Provider) sign(ctx context.Context, s *signing, background bool) {
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
	keptSince := p.signedAt
	s.token, s.err = token, err
	p.signing = nil
	p.mu.Unlock()
	close(s.done)

	if err != nil && background && p.logger != nil {
		p.logger.LogAttrs(ctx, slog.LevelWarn, "IAM auth: signing a new token failed; new connections use the kept token until it is reuseUntil old, then wait for a signing",
			slog.String("user", p.cfg.UserID),
			slog.Time("keptTokenSignedAt", keptSince),
			slog.Duration("reuseUntil", ReuseUntil),
			slog.String("error", err.Error()))
	}
}

// Configure returns cc set up for IAM authentication: every new connection
// authenticates with the provider's token as Config.UserID (Password and
// the URL's credentials are not used), and connections are retired after
// ConnMaxLifetime, before ElastiCache's 12-hour limit.
func (p *Provider) Configure(cc redisclient.Config) redisclient.Config {
	cc.Password = ""
	cc.CredentialsProvider = p.Credentials
	cc.ConnMaxLifetime = ConnMaxLifetime
	return cc
}
