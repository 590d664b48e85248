package redisclient_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// TestNewTLSVerifies: a rediss:// URL gives both the single-node and
// the cluster client a TLS configuration that verifies the server against
// the given roots and the URL's host, with TLS 1.2 at least, even when the
// URL asks go-redis to skip verification; a redis:// URL gives none.
func TestNewTLSVerifies(t *testing.T) {
	roots := redistest.NewCA(t, "client test CA").Pool()
	cases := []struct {
		name      string
		url       string
		cluster   bool
		roots     *x509.CertPool
		wantTLS   bool
		wantHost  string
		wantRoots *x509.CertPool
	}{
		{"single node, system roots", "rediss://cache.example.com:6379", false, nil, true, "cache.example.com", nil},
		{"single node, private CA", "rediss://cache.example.com:6379", false, roots, true, "cache.example.com", roots},
		{"single node, skip_verify overridden", "rediss://cache.example.com:6379?skip_verify=true", false, roots, true, "cache.example.com", roots},
		{"cluster, private CA", "rediss://clustercfg.example.com:6379", true, roots, true, "clustercfg.example.com", roots},
		{"cluster, skip_verify overridden", "rediss://clustercfg.example.com:6379?skip_verify=true", true, nil, true, "clustercfg.example.com", nil},
		{"plain URL", "redis://cache.example.com:6379", false, roots, false, "", nil},
		{"plain cluster URL", "redis://cache.example.com:6379", true, roots, false, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, err := redisclient.New(redisclient.Config{URL: tc.url, Cluster: tc.cluster, RootCAs: tc.roots})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var tc2 *tls.Config
			switch c := client.(type) {
			case *redis.Client:
				tc2 = c.Options().TLSConfig
			case *redis.ClusterClient:
				tc2 = c.Options().TLSConfig
			default:
				t.Fatalf("client is a %T", client)
			}
			if !tc.wantTLS {
				if tc2 != nil {
					t.Errorf("TLS configured for %s", tc.url)
				}
				return
			}
			switch {
			case tc2 == nil:
				t.Fatal("no TLS configuration")
			case tc2.InsecureSkipVerify:
				t.Error("InsecureSkipVerify is on")
			case tc2.MinVersion < tls.VersionTLS12:
				t.Errorf("MinVersion = %#x, want TLS 1.2 or later", tc2.MinVersion)
			case tc2.ServerName != tc.wantHost:
				t.Errorf("ServerName = %q, want %q", tc2.ServerName, tc.wantHost)
			case tc2.RootCAs != tc.wantRoots:
				t.Errorf("RootCAs = %p, want %p", tc2.RootCAs, tc.wantRoots)
			}
		})
	}
}

// TestNewURLErrorQuotesNothing: a Redis URL that does not parse is
// reported naming the URL and the kind of fault, never any of the
// URL: with '@', ':' or '/' in a password, where the password ends is
// exactly what the parser gets wrong, so whatever it quotes back (a host, a
// port, a path, an escape) may be a piece of the password.
func TestNewURLErrorQuotesNothing(t *testing.T) {
	cases := []struct {
		name       string
		url        string
		singleOnly bool     // the cluster parser ignores the path
		secrets    []string // none of these may appear in the error
		wantKind   string
	}{
		{"'@' in the password, bad escape in the path", "rediss://:p@ssw0rd@host/%zz", false, []string{"ssw0rd", "p@ss", "host"}, "invalid URL escape"},
		{"'@' in the password, bad database number", "rediss://:p@ssw0rd@host:6379/x9", true, []string{"ssw0rd", "x9"}, "invalid database number"},
		{"':' in the password, bad port", "rediss://app:pw:se:cr3t@host:63a79", false, []string{"pw:se", "cr3t", "63a79"}, "invalid port"},
		{"'/' in the password: what follows it is taken for a port", "rediss://:pw/secr3t@host:6379", false, []string{"pw", "secr3t"}, "invalid port"},
		{"'/' in the password after digits: the rest is a path", "rediss://:12/secr3t@host:6379", true, []string{"secr3t"}, "invalid database number"},
		{"'/' twice in the password: a path of two segments", "redis://:12/s3c/r3t@host", true, []string{"s3c", "r3t"}, "invalid URL path"},
		{"'@', ':' and '/' in the password", "rediss://:p@s:s/w0rd@host:6379", false, []string{"w0rd", "p@s", "s:s"}, "invalid port"},
		{"'%' in the password", "rediss://:pw%zzsecr3t@host:6379", false, []string{"pw%", "%zz", "secr3t"}, "invalid URL escape"},
		{"an unknown scheme", "http://:hunter2@host:6379", false, []string{"hunter2", "http"}, "invalid URL scheme"},
		{"an unknown option", "rediss://:hunter2@host:6379?hunter3=1", false, []string{"hunter2", "hunter3"}, "unexpected option"},
	}
	for _, tc := range cases {
		for _, cluster := range []bool{false, true} {
			if cluster && tc.singleOnly {
				continue
			}
			t.Run(fmt.Sprintf("%s, cluster %v", tc.name, cluster), func(t *testing.T) {
				client, err := redisclient.New(redisclient.Config{URL: tc.url, Cluster: cluster})
				if err == nil {
					client.Close()
					t.Fatalf("New(%q) succeeded, want a parse error", tc.url)
				}
				msg := err.Error()
				for _, want := range []string{"Redis URL", tc.wantKind} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not say %q", msg, want)
					}
				}
				for _, secret := range tc.secrets {
					if strings.Contains(msg, secret) {
						t.Errorf("error %q quotes %q", msg, secret)
					}
				}
			})
		}
	}
}

// TestNewSpeaksRESP2: every client New builds speaks RESP2
// (Protocol 2), the single node and the cluster client, TLS or not. The
// pool's health check of TLS connections (checkableTLSConn) takes any byte
// waiting for the server's close; RESP3 lets servers push data unasked.
func TestNewSpeaksRESP2(t *testing.T) {
	cases := []struct {
		name    string
		url     string
		cluster bool
	}{
		{"TLS single node", "rediss://cache.example.com:6379", false},
		{"TLS cluster", "rediss://clustercfg.example.com:6379", true},
		{"TLS single node asking for RESP3 in the URL", "rediss://cache.example.com:6379?protocol=3", false},
		{"TLS cluster asking for RESP3 in the URL", "rediss://clustercfg.example.com:6379?protocol=3", true},
		{"plain single node", "redis://cache.example.com:6379", false},
		{"plain cluster", "redis://clustercfg.example.com:6379", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, err := redisclient.New(redisclient.Config{URL: tc.url, Cluster: tc.cluster})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var protocol int
			switch c := client.(type) {
			case *redis.Client:
				protocol = c.Options().Protocol
			case *redis.ClusterClient:
				protocol = c.Options().Protocol
			default:
				t.Fatalf("client is a %T", client)
			}
			if protocol != 2 {
				t.Errorf("Protocol = %d, want 2 (RESP2: no push notifications, which the TLS pool check cannot tell from a close)", protocol)
			}
		})
	}
}
