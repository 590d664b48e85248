package iamauth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/slidegate/slidegate/internal/iamauth"
)

// Fixed inputs of the token tests: AWS's documentation example key pair
// and a session token with characters that SigV4 must percent-encode.
const (
	testAccessKey    = "AKIAIOSFODNN7EXAMPLE"
	testSecretKey    = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	testSessionToken = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJH+MEUCIQ=="
	testRegion       = "eu-west-1"
)

var testTime = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func staticCreds(session string) aws.Credentials {
	return aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecretKey, SessionToken: session}
}

// TestTokenFormat pins the token to AWS's documented format: a presigned
// GET of http://<cache>/?Action=connect&User=<id>[&ResourceType=
// ServerlessCache] for elasticache, without the scheme, and checks the
// signature by recomputing SigV4 by hand from the inputs alone.
func TestTokenFormat(t *testing.T) {
	cases := []struct {
		name       string
		cfg        iamauth.Config
		session    string
		wantParams map[string]string // besides the X-Amz-* every token has
	}{
		{
			name:       "node-based cache",
			cfg:        iamauth.Config{UserID: "slidegate-app", CacheName: "rate-limits", Region: testRegion},
			wantParams: map[string]string{"Action": "connect", "User": "slidegate-app"},
		},
		{
			name:       "serverless cache",
			cfg:        iamauth.Config{UserID: "slidegate-app", CacheName: "rate-limits-sls", Serverless: true, Region: testRegion},
			wantParams: map[string]string{"Action": "connect", "User": "slidegate-app", "ResourceType": "ServerlessCache"},
		},
		{
			name:       "temporary credentials carry their session token",
			cfg:        iamauth.Config{UserID: "slidegate-app", CacheName: "rate-limits", Region: testRegion},
			session:    testSessionToken,
			wantParams: map[string]string{"Action": "connect", "User": "slidegate-app", "X-Amz-Security-Token": testSessionToken},
		},
		{
			name:       "user id with characters to escape",
			cfg:        iamauth.Config{UserID: "app_user.1~x", CacheName: "c1", Region: "us-east-1"},
			wantParams: map[string]string{"Action": "connect", "User": "app_user.1~x"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			token, err := iamauth.Token(context.Background(), tc.cfg, staticCreds(tc.session), testTime)
			if err != nil {
				t.Fatalf("Token: %v", err)
			}
			if strings.Contains(token, "://") {
				t.Fatalf("token %q has a URL scheme", token)
			}
			u, err := url.Parse("http://" + token)
			if err != nil {
				t.Fatalf("token is not a URL without its scheme: %v", err)
			}
			if u.Host != tc.cfg.CacheName || u.Path != "/" {
				t.Errorf("host %q path %q, want %q and /", u.Host, u.Path, tc.cfg.CacheName)
			}

			want := maps.Clone(tc.wantParams)
			want["X-Amz-Algorithm"] = "AWS4-HMAC-SHA256"
			want["X-Amz-Credential"] = testAccessKey + "/20261129/" + tc.cfg.Region + "/elasticache/aws4_request"
			want["X-Amz-Date"] = "20261129T120000Z"
			want["X-Amz-Expires"] = "900"
			want["X-Amz-SignedHeaders"] = "host"

			got := map[string]string{}
			for k, vs := range u.Query() {
				if len(vs) != 1 {
					t.Errorf("query parameter %s appears %d times", k, len(vs))
				}
				got[k] = vs[0]
			}
			signature := got["X-Amz-Signature"]
			delete(got, "X-Amz-Signature")
			if !maps.Equal(got, want) {
				t.Errorf("query parameters:\n got %v\nwant %v", got, want)
			}
			if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(signature) {
				t.Fatalf("X-Amz-Signature = %q, want 64 lower-case hex digits", signature)
			}
			if hand := presignSignature(tc.cfg.CacheName, want, tc.cfg.Region, testSecretKey); signature != hand {
				t.Errorf("signature %s, but SigV4 computed by hand gives %s", signature, hand)
			}
		})
	}
}

// TestTokenDeterministic: the same inputs give the same token, and each
// signed input changes the signature.
func TestTokenDeterministic(t *testing.T) {
	ctx := context.Background()
	base := iamauth.Config{UserID: "slidegate-app", CacheName: "rate-limits", Region: testRegion}
	sign := func(cfg iamauth.Config, creds aws.Credentials, at time.Time) string {
		t.Helper()
		token, err := iamauth.Token(ctx, cfg, creds, at)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	reference := sign(base, staticCreds(""), testTime)
	if again := sign(base, staticCreds(""), testTime.In(time.FixedZone("UTC+9", 9*3600))); again != reference {
		t.Fatalf("same inputs (the time in another zone) gave another token:\n%s\n%s", reference, again)
	}
	otherSecret := staticCreds("")
	otherSecret.SecretAccessKey = "another-secret"
	cases := []struct {
		name  string
		cfg   iamauth.Config
		creds aws.Credentials
		at    time.Time
	}{
		{"a second later", base, staticCreds(""), testTime.Add(time.Second)},
		{"another secret key", base, otherSecret, testTime},
		{"another user", iamauth.Config{UserID: "other", CacheName: base.CacheName, Region: base.Region}, staticCreds(""), testTime},
		{"another cache", iamauth.Config{UserID: base.UserID, CacheName: "other", Region: base.Region}, staticCreds(""), testTime},
		{"another region", iamauth.Config{UserID: base.UserID, CacheName: base.CacheName, Region: "us-west-2"}, staticCreds(""), testTime},
	}
	refSig := signatureOf(t, reference)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if sig := signatureOf(t, sign(tc.cfg, tc.creds, tc.at)); sig == refSig {
				t.Errorf("signature unchanged: %s", sig)
			}
		})
	}
}

// TestTokenRefusesIncompleteInput: nothing is signed without a user, a
// cache that can be a host name, a region and an access key, and the
// errors never quote the secret key.
func TestTokenRefusesIncompleteInput(t *testing.T) {
	good := iamauth.Config{UserID: "u", CacheName: "c", Region: testRegion}
	cases := []struct {
		name    string
		cfg     iamauth.Config
		creds   aws.Credentials
		wantErr string
	}{
		{"no user", iamauth.Config{CacheName: "c", Region: testRegion}, staticCreds(""), "user id"},
		{"no cache", iamauth.Config{UserID: "u", Region: testRegion}, staticCreds(""), "cache name"},
		{"cache that is not a host", iamauth.Config{UserID: "u", CacheName: "a/b", Region: testRegion}, staticCreds(""), "not a host name"},
		{"no region", iamauth.Config{UserID: "u", CacheName: "c"}, staticCreds(""), "region"},
		{"no access key", good, aws.Credentials{SecretAccessKey: testSecretKey}, "access key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			token, err := iamauth.Token(context.Background(), tc.cfg, tc.creds, testTime)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Token = %q, %v; want an error about %q", token, err, tc.wantErr)
			}
			if strings.Contains(err.Error(), testSecretKey) {
				t.Errorf("error quotes the secret key: %v", err)
			}
		})
	}
}

// TestTokenFromStaticCredentialsProvider: the SDK's static provider, as
// tests and local runs use it, gives the same token as its credentials.
func TestTokenFromStaticCredentialsProvider(t *testing.T) {
	ctx := context.Background()
	creds, err := credentials.NewStaticCredentialsProvider(testAccessKey, testSecretKey, testSessionToken).Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := iamauth.Config{UserID: "slidegate-app", CacheName: "rate-limits", Region: testRegion}
	fromProvider, err := iamauth.Token(ctx, cfg, creds, testTime)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := iamauth.Token(ctx, cfg, staticCreds(testSessionToken), testTime)
	if err != nil {
		t.Fatal(err)
	}
	if fromProvider != direct {
		t.Errorf("tokens differ:\n%s\n%s", fromProvider, direct)
	}
}

func signatureOf(t *testing.T, token string) string {
	t.Helper()
	u, err := url.Parse("http://" + token)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("X-Amz-Signature")
}

// presignSignature computes the SigV4 signature of a presigned GET of
// http://host/ with the given query parameters (X-Amz-Signature excluded),
// following the SigV4 specification step by step: canonical request, string
// to sign, derived key, signature.
func presignSignature(host string, params map[string]string, region, secretKey string) string {
	var query []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		query = append(query, uriEncode(k)+"="+uriEncode(params[k]))
	}
	emptyBody := sha256.Sum256(nil)
	canonicalRequest := strings.Join([]string{
		"GET",
		"/",
		strings.Join(query, "&"),
		"host:" + host + "\n",
		"host",
		hex.EncodeToString(emptyBody[:]),
	}, "\n")

	amzDate := params["X-Amz-Date"]
	date := amzDate[:8]
	scope := date + "/" + region + "/elasticache/aws4_request"
	requestHash := sha256.Sum256([]byte(canonicalRequest))
	stringToSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(requestHash[:])

	key := hmacSHA256([]byte("AWS4"+secretKey), date)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "elasticache")
	key = hmacSHA256(key, "aws4_request")
	return hex.EncodeToString(hmacSHA256(key, stringToSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// uriEncode is SigV4's URI encoding: every byte except the unreserved
// characters A-Z a-z 0-9 - . _ ~ as %XY with upper-case hex.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
