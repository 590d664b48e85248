package ratelimit_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestClientConfigFromEnvTLS: REDIS_TLS_CA_FILE is read into RootCAs; a bad
// file is reported naming the variable and the path and leaves the system
// roots in place (never "trust anything"); a skip_verify parameter is
// reported without quoting the URL, which may hold a password.
func TestClientConfigFromEnvTLS(t *testing.T) {
	dir := t.TempDir()
	ca := redistest.NewCA(t, "config test CA")
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bundle := write("bundle.pem", append(append([]byte("# our CAs\n"), ca.CertPEM()...), redistest.NewCA(t, "second CA").CertPEM()...))
	noCerts := write("key-only.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	corrupt := write("corrupt.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")}))

	cases := []struct {
		name      string
		env       map[string]string
		wantRoots bool
		wantErr   []string // substrings of the error; none: no error
		notInErr  string
	}{
		{"no CA file: system roots", map[string]string{"REDIS_URL": "rediss://cache:6379"}, false, nil, ""},
		{"CA file", map[string]string{"REDIS_URL": "rediss://cache:6379", "REDIS_TLS_CA_FILE": ca.CertFile()}, true, nil, ""},
		{"bundle of two CAs", map[string]string{"REDIS_URL": "rediss://cache:6379", "REDIS_TLS_CA_FILE": bundle}, true, nil, ""},
		{"missing file", map[string]string{"REDIS_URL": "rediss://cache:6379", "REDIS_TLS_CA_FILE": filepath.Join(dir, "nope.pem")},
			false, []string{"REDIS_TLS_CA_FILE", "nope.pem", "no such file", "system roots"}, ""},
		{"file without certificates", map[string]string{"REDIS_URL": "rediss://cache:6379", "REDIS_TLS_CA_FILE": noCerts},
			false, []string{"REDIS_TLS_CA_FILE", "key-only.pem", "no PEM certificate"}, ""},
		{"corrupt certificate", map[string]string{"REDIS_URL": "rediss://cache:6379", "REDIS_TLS_CA_FILE": corrupt},
			false, []string{"REDIS_TLS_CA_FILE", "corrupt.pem", "certificate 1"}, ""},
		{"CA file with a plain URL", map[string]string{"REDIS_URL": "redis://cache:6379", "REDIS_TLS_CA_FILE": ca.CertFile()},
			true, []string{"REDIS_TLS_CA_FILE", "not a rediss://"}, ""},
		{"skip_verify in the URL", map[string]string{"REDIS_URL": "rediss://:hunter2@cache:6379?skip_verify=true"},
			false, []string{"REDIS_URL", "skip_verify", "always verified"}, "hunter2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ratelimit.ClientConfigFromEnv(func(k string) string { return tc.env[k] })
			if (cfg.RootCAs != nil) != tc.wantRoots {
				t.Errorf("RootCAs set = %v, want %v", cfg.RootCAs != nil, tc.wantRoots)
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one saying %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if tc.notInErr != "" && strings.Contains(err.Error(), tc.notInErr) {
				t.Errorf("error %q quotes %q", err, tc.notInErr)
			}
		})
	}
}

// TestNewClientTLSVerifies: a rediss:// URL gives both the single-node and
// the cluster client a TLS configuration that verifies the server against
// the given roots and the URL's host, with TLS 1.2 at least, even when the
// URL asks go-redis to skip verification; a redis:// URL gives none.
func TestNewClientTLSVerifies(t *testing.T) {
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
			client, err := ratelimit.NewClient(ratelimit.ClientConfig{URL: tc.url, Cluster: tc.cluster, RootCAs: tc.roots})
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
