package iamauth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/iamauth"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// countingCreds counts how often credentials are retrieved from a real
// static provider.
type countingCreds struct {
	aws.CredentialsProvider
	n atomic.Int64
}

func (c *countingCreds) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c.n.Add(1)
	return c.CredentialsProvider.Retrieve(ctx)
}

var providerCfg = iamauth.Config{UserID: "slidegate-app", CacheName: "rate-limits", Region: testRegion}

// TestProviderRenewsBeforeExpiry: the provider hands out the token it
// signed while it is younger than RefreshAfter (10 of its 15 minutes), and
// signs a new one, as of the clock's time, once it is that old.
func TestProviderRenewsBeforeExpiry(t *testing.T) {
	t0 := testTime
	steps := []struct {
		name     string
		at       time.Time
		signedAt time.Time // the time the token handed out was signed at
	}{
		{"first connection signs a token", t0, t0},
		{"five minutes later the token is reused", t0.Add(5 * time.Minute), t0},
		{"just before the refresh point it is still reused", t0.Add(iamauth.RefreshAfter - time.Second), t0},
		{"at the refresh point a new token is signed", t0.Add(iamauth.RefreshAfter), t0.Add(iamauth.RefreshAfter)},
		{"the new token is reused in turn", t0.Add(16 * time.Minute), t0.Add(iamauth.RefreshAfter)},
		{"long after expiry a new one is signed", t0.Add(3 * time.Hour), t0.Add(3 * time.Hour)},
		{"a clock that went back gets a token it has not outrun", t0.Add(2 * time.Hour), t0.Add(2 * time.Hour)},
	}
	clock := &fakeClock{now: t0}
	creds := &countingCreds{CredentialsProvider: credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, "")}
	p, err := iamauth.NewProvider(providerCfg, creds, iamauth.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	signings := 0
	var last time.Time
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			clock.Set(step.at)
			user, token, err := p.Credentials(context.Background())
			if err != nil {
				t.Fatalf("Credentials: %v", err)
			}
			if user != providerCfg.UserID {
				t.Errorf("user %q, want %q", user, providerCfg.UserID)
			}
			want, err := iamauth.Token(context.Background(), providerCfg, staticCreds(""), step.signedAt)
			if err != nil {
				t.Fatal(err)
			}
			if token != want {
				t.Errorf("token is not the one signed at %s", step.signedAt.Format(time.TimeOnly))
			}
			if !step.signedAt.Equal(last) {
				signings++
				last = step.signedAt
			}
			if got := creds.n.Load(); got != int64(signings) {
				t.Errorf("credentials retrieved %d times, want once per signing (%d)", got, signings)
			}
		})
	}
}

// TestProviderWaitIsBoundedByContext: a credential source that hangs costs
// a caller no more than its context; the signing goes on, and a later
// connection gets its token.
func TestProviderWaitIsBoundedByContext(t *testing.T) {
	release := make(chan struct{})
	static := credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, "")
	hanging := aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
		select {
		case <-release:
			return static.Retrieve(ctx)
		case <-ctx.Done():
			return aws.Credentials{}, ctx.Err()
		}
	})
	p, err := iamauth.NewProvider(providerCfg, hanging, iamauth.Options{Now: func() time.Time { return testTime }})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, token, err := p.Credentials(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || token != "" {
		t.Fatalf("Credentials with a hanging source = %q, %v; want the context's deadline error", token, err)
	}
	if !strings.Contains(err.Error(), providerCfg.UserID) {
		t.Errorf("error %q does not name the user", err)
	}

	close(release)
	_, token, err = p.Credentials(context.Background())
	if err != nil || token == "" {
		t.Fatalf("Credentials once the source answers = %q, %v; want a token", token, err)
	}
}

// TestProviderCredentialFailure: a failed retrieval fails the connection
// with an error that says what failed and quotes no secret, and the next
// connection tries again.
func TestProviderCredentialFailure(t *testing.T) {
	var calls atomic.Int64
	static := credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, testSessionToken)
	flaky := aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
		if calls.Add(1) == 1 {
			return aws.Credentials{}, errors.New("no EC2 IMDS role found")
		}
		return static.Retrieve(ctx)
	})
	p, err := iamauth.NewProvider(providerCfg, flaky, iamauth.Options{Now: func() time.Time { return testTime }})
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := p.Credentials(context.Background())
	if err == nil || token != "" {
		t.Fatalf("Credentials = %q, %v; want an error", token, err)
	}
	for _, want := range []string{providerCfg.UserID, "retrieve AWS credentials", "no EC2 IMDS role found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for _, secret := range []string{testSecretKey, testSessionToken} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error quotes a secret")
		}
	}
	_, token, err = p.Credentials(context.Background())
	if err != nil || token == "" {
		t.Fatalf("second Credentials = %q, %v; want a token", token, err)
	}
}

// TestNewProviderRefusesIncompleteConfig: an incomplete configuration is
// refused up front, naming what is missing.
func TestNewProviderRefusesIncompleteConfig(t *testing.T) {
	static := credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, "")
	cases := []struct {
		name    string
		cfg     iamauth.Config
		creds   aws.CredentialsProvider
		wantErr string
	}{
		{"no region (AWS_REGION unset)", iamauth.Config{UserID: "u", CacheName: "c"}, static, "region"},
		{"no cache", iamauth.Config{UserID: "u", Region: testRegion}, static, "cache name"},
		{"no credentials", providerCfg, nil, "credentials"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := iamauth.NewProvider(tc.cfg, tc.creds, iamauth.Options{}); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NewProvider error %v, want one about %q", err, tc.wantErr)
			}
		})
	}
}

// TestConfigureSetsClientOptions: a client configured for IAM asks the
// provider for every new connection's credentials, ignores any password,
// and retires connections before ElastiCache's 12-hour limit, on the single
// node and the cluster client alike.
func TestConfigureSetsClientOptions(t *testing.T) {
	p, err := iamauth.NewProvider(providerCfg, credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, ""),
		iamauth.Options{Now: func() time.Time { return testTime }})
	if err != nil {
		t.Fatal(err)
	}
	if iamauth.ConnMaxLifetime <= 0 || iamauth.ConnMaxLifetime >= 12*time.Hour {
		t.Fatalf("ConnMaxLifetime = %v, want below ElastiCache's 12 h", iamauth.ConnMaxLifetime)
	}
	wantToken, err := iamauth.Token(context.Background(), providerCfg, staticCreds(""), testTime)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		cluster bool
	}{
		{"single node", false},
		{"cluster", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := p.Configure(ratelimit.ClientConfig{URL: "rediss://cache.example.com:6379", Cluster: tc.cluster, Password: "from-secrets-manager"})
			if cc.Password != "" {
				t.Error("Configure kept the AUTH password")
			}
			client, err := ratelimit.NewClient(cc)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var lifetime time.Duration
			var provide func(context.Context) (string, string, error)
			switch c := client.(type) {
			case *redis.Client:
				lifetime, provide = c.Options().ConnMaxLifetime, c.Options().CredentialsProviderContext
			case *redis.ClusterClient:
				lifetime, provide = c.Options().ConnMaxLifetime, c.Options().CredentialsProviderContext
			default:
				t.Fatalf("client is a %T", client)
			}
			if lifetime != iamauth.ConnMaxLifetime {
				t.Errorf("ConnMaxLifetime = %v, want %v", lifetime, iamauth.ConnMaxLifetime)
			}
			if provide == nil {
				t.Fatal("no CredentialsProviderContext")
			}
			user, token, err := provide(context.Background())
			if err != nil || user != providerCfg.UserID || token != wantToken {
				t.Errorf("credentials = %q, (token matches: %v), %v; want the user and the provider's token", user, token == wantToken, err)
			}
		})
	}
}
