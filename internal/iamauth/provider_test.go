package iamauth_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/iamauth"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

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

// TestProviderRenewsBeforeExpiry: with a working credential source, the
// provider hands out the token it signed while it is younger than
// RefreshAfter (10 of its 15 minutes), and a caller that finds it
// ReuseUntil old or older (or from the future: a clock that went back)
// gets a new one signed, as of the clock's time, before it is answered.
// (Between RefreshAfter and ReuseUntil the kept token is handed out while
// a new one is signed in the background: TestProviderRefreshesInBackground.)
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
		{"at ReuseUntil a new token is signed before answering", t0.Add(iamauth.ReuseUntil), t0.Add(iamauth.ReuseUntil)},
		{"the new token is reused in turn", t0.Add(iamauth.ReuseUntil + 5*time.Minute), t0.Add(iamauth.ReuseUntil)},
		{"long after expiry a new one is signed", t0.Add(3 * time.Hour), t0.Add(3 * time.Hour)},
		{"a clock that went back gets a token it has not outrun", t0.Add(2 * time.Hour), t0.Add(2 * time.Hour)},
	}
	clock := testkit.NewClock(t0)
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

// switchableCreds is a credential source whose behaviour a test switches:
// it answers with static credentials, fails at once, or hangs until
// released (then answers) or until the signing's context ends. It counts
// retrievals.
type switchableCreds struct {
	static  aws.CredentialsProvider
	release chan struct{}
	n       atomic.Int64
	mu      sync.Mutex
	mode    string // "works", "fails" or "hangs"
}

func newSwitchableCreds(t *testing.T) *switchableCreds {
	c := &switchableCreds{
		static:  credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, testSessionToken),
		release: make(chan struct{}),
		mode:    "works",
	}
	t.Cleanup(func() { c.set("works"); close(c.release) })
	return c
}

func (c *switchableCreds) set(mode string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode = mode
}

func (c *switchableCreds) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c.n.Add(1)
	c.mu.Lock()
	mode := c.mode
	c.mu.Unlock()
	switch mode {
	case "fails":
		return aws.Credentials{}, errors.New("credential source down")
	case "hangs":
		select {
		case <-c.release:
		case <-ctx.Done():
			return aws.Credentials{}, ctx.Err()
		}
	}
	return c.static.Retrieve(ctx)
}

// doneContext is a context that has already ended: a caller that cannot
// wait at all.
func doneContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// tokenAt is the token the provider signs as of at.
func tokenAt(t *testing.T, at time.Time) string {
	t.Helper()
	token, err := iamauth.Token(context.Background(), providerCfg, staticCreds(testSessionToken), at)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// eventually polls cond until it holds, failing the test if it does not
// within a generous deadline (a background signing on an idle machine
// takes microseconds).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
	}
}

// TestProviderKeepsTokenWhileResigning: once the kept token is RefreshAfter
// old, a credential source that fails or hangs costs new connections
// nothing until the token is ReuseUntil old: they get the kept token at
// once, even a caller that cannot wait at all. From ReuseUntil on they
// wait for a signing and fail with it, within their context.
func TestProviderKeepsTokenWhileResigning(t *testing.T) {
	cases := []struct {
		name    string
		source  string        // the credential source's behaviour after the first signing
		age     time.Duration // the kept token's age at the call
		ctx     func() context.Context
		wantErr string // "" for the kept token
	}{
		{"failing source at the refresh point", "fails", iamauth.RefreshAfter, doneContext, ""},
		{"hanging source at 12 minutes", "hangs", 12 * time.Minute, doneContext, ""},
		{"failing source just before ReuseUntil", "fails", iamauth.ReuseUntil - time.Second, doneContext, ""},
		{"hanging source just before ReuseUntil", "hangs", iamauth.ReuseUntil - time.Second, doneContext, ""},
		{"failing source at ReuseUntil fails the call", "fails", iamauth.ReuseUntil, context.Background, "credential source down"},
		{"failing source past expiry fails the call", "fails", iamauth.TokenLifetime + time.Minute, context.Background, "credential source down"},
		{"hanging source past ReuseUntil costs the caller its context", "hangs", iamauth.ReuseUntil + time.Minute, doneContext, "waiting for a token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t0 := testTime
			clock := testkit.NewClock(t0)
			creds := newSwitchableCreds(t)
			p, err := iamauth.NewProvider(providerCfg, creds, iamauth.Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			if _, token, err := p.Credentials(context.Background()); err != nil || token != tokenAt(t, t0) {
				t.Fatalf("first Credentials = %v; want the token signed at t0", err)
			}
			creds.set(tc.source)
			clock.Set(t0.Add(tc.age))

			user, token, err := p.Credentials(tc.ctx())
			if tc.wantErr != "" {
				if err == nil || token != "" || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), providerCfg.UserID) {
					t.Fatalf("Credentials = (token given: %v), %v; want an error naming the user and saying %q", token != "", err, tc.wantErr)
				}
				return
			}
			if err != nil || user != providerCfg.UserID || token != tokenAt(t, t0) {
				t.Fatalf("Credentials = %q, (kept token: %v), %v; want the kept token at once", user, token == tokenAt(t, t0), err)
			}
			// The kept token's holder did start a new signing.
			eventually(t, "a background signing", func() bool { return creds.n.Load() == 2 })
		})
	}
}

// TestProviderRefreshesInBackground: between RefreshAfter and ReuseUntil
// the kept token is handed out while one new token is signed in the
// background; once it is, it is handed out. A failed background signing is
// logged (without the token or the credentials) and tried again on a
// later call.
func TestProviderRefreshesInBackground(t *testing.T) {
	t0 := testTime
	clock := testkit.NewClock(t0)
	creds := newSwitchableCreds(t)
	var logs testkit.Buffer
	p, err := iamauth.NewProvider(providerCfg, creds, iamauth.Options{Now: clock.Now, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	credentialsAt := func(at time.Time) string {
		t.Helper()
		clock.Set(at)
		_, token, err := p.Credentials(doneContext())
		if err != nil {
			t.Fatalf("Credentials at t0+%s: %v", at.Sub(t0), err)
		}
		return token
	}
	if _, _, err := p.Credentials(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A hanging signing is not doubled by later calls.
	creds.set("hangs")
	at := t0.Add(11 * time.Minute)
	if credentialsAt(at) != tokenAt(t, t0) {
		t.Fatal("at 11 minutes with a hanging source: not the kept token")
	}
	eventually(t, "the background signing", func() bool { return creds.n.Load() == 2 })
	if credentialsAt(at.Add(30*time.Second)) != tokenAt(t, t0) || creds.n.Load() != 2 {
		t.Fatalf("a call during the hanging signing: retrievals %d, want 2 (one signing at a time)", creds.n.Load())
	}

	// Once it answers, its token (signed as of the clock's time then) is
	// handed out.
	creds.set("works")
	clock.Set(at.Add(time.Minute))
	creds.release <- struct{}{}
	signed := at.Add(time.Minute)
	eventually(t, "the new token", func() bool { return credentialsAt(signed) == tokenAt(t, signed) })
	if n := creds.n.Load(); n != 2 {
		t.Errorf("retrievals %d, want 2", n)
	}

	// A failing background signing is logged and retried later.
	creds.set("fails")
	at = signed.Add(iamauth.RefreshAfter)
	if credentialsAt(at) != tokenAt(t, signed) {
		t.Fatal("at the refresh point with a failing source: not the kept token")
	}
	eventually(t, "the failed signing's log line", func() bool { return strings.Contains(logs.String(), "credential source down") })
	creds.set("works")
	retry := at.Add(time.Minute)
	if credentialsAt(retry) != tokenAt(t, signed) {
		t.Fatal("a minute after the failed signing: not the kept token")
	}
	eventually(t, "the retried signing's token", func() bool { return credentialsAt(retry) == tokenAt(t, retry) })
	if n := creds.n.Load(); n != 4 {
		t.Errorf("retrievals %d, want 4", n)
	}

	log := logs.String()
	for _, want := range []string{"signing a new token failed", providerCfg.UserID, "credential source down"} {
		if !strings.Contains(log, want) {
			t.Errorf("log does not say %q:\n%s", want, log)
		}
	}
	for _, secret := range []string{testSecretKey, testSessionToken, "X-Amz-Signature"} {
		if strings.Contains(log, secret) {
			t.Errorf("log quotes %q", secret)
		}
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
			cc := p.Configure(redisclient.Config{URL: "rediss://cache.example.com:6379", Cluster: tc.cluster, Password: "from-secrets-manager"})
			if cc.Password != "" {
				t.Error("Configure kept the AUTH password")
			}
			client, err := redisclient.New(cc)
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
