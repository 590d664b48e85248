package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestCAIssuesVerifiableServerCertificates: a certificate from CA.Issue
// verifies against the CA's pool for the names it was issued for, and not
// for other names or against another CA.
func TestCAIssuesVerifiableServerCertificates(t *testing.T) {
	ca := NewCA(t, "issuing CA")
	other := NewCA(t, "other CA")
	sc := ca.Issue(t, "localhost", "127.0.0.1")
	pair, err := tls.LoadX509KeyPair(sc.CertFile, sc.KeyFile)
	if err != nil {
		t.Fatalf("load issued key pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if caPEM, err := os.ReadFile(sc.CAFile); err != nil || string(caPEM) != string(ca.CertPEM()) {
		t.Errorf("CAFile does not hold the CA's certificate (%v)", err)
	}
	cases := []struct {
		name   string
		roots  *x509.CertPool
		host   string
		wantOK bool
	}{
		{"DNS name", ca.Pool(), "localhost", true},
		{"IP address", ca.Pool(), "127.0.0.1", true},
		{"another name", ca.Pool(), "redis.example.com", false},
		{"another CA", other.Pool(), "localhost", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{Roots: tc.roots, DNSName: tc.host})
			if (err == nil) != tc.wantOK {
				t.Errorf("Verify for %s: %v, want ok=%v", tc.host, err, tc.wantOK)
			}
		})
	}
}

// TestStartServerWithTLS: a TLS server answers only TLS on its port, and
// the harness's client and probes reach it; its URL is rediss://.
func TestStartServerWithTLS(t *testing.T) {
	sc := NewCA(t, "tls server CA").Issue(t, "127.0.0.1")
	s := StartServerWith(t, Options{TLS: &sc})
	if !strings.HasPrefix(s.URL(), "rediss://127.0.0.1:") {
		t.Errorf("URL() = %q, want rediss://127.0.0.1:PORT", s.URL())
	}
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer plain.Close()
	if err := plain.Ping(t.Context()).Err(); err == nil {
		t.Error("a plain-text PING on the TLS port succeeded")
	}
	s.Restart(t)
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING over TLS after Restart: %v", err)
	}
}

// TestStartServerWithAdmin: with the default user locked out, the harness
// still probes, restarts and stops the server as AdminUser.
func TestStartServerWithAdmin(t *testing.T) {
	s := StartServerWith(t, Options{Admin: true})
	admin := s.Client(t)
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatalf("lock out the default user: %v", err)
	}
	anon := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer anon.Close()
	if err := anon.Ping(t.Context()).Err(); err == nil {
		t.Error("the default user still gets in")
	}
	if who, err := admin.Do(t.Context(), "ACL", "WHOAMI").Text(); err != nil || who != AdminUser {
		t.Errorf("ACL WHOAMI = %q, %v; want %s", who, err, AdminUser)
	}
	ctx, cancel := context.WithTimeout(t.Context(), readyTimeout)
	defer cancel()
	if _, err := s.access.do(ctx, s.Addr(), "PING"); err != nil {
		t.Errorf("harness probe: %v", err)
	}
	s.Stop()
	if s.running() {
		t.Error("server still running after Stop")
	}
}

// TestStartServerWithClusterOverTLS: a one-node cluster over TLS serves
// all slots to a verifying cluster client.
func TestStartServerWithClusterOverTLS(t *testing.T) {
	ca := NewCA(t, "cluster CA")
	sc := ca.Issue(t, "localhost")
	s := StartServerWith(t, Options{TLS: &sc, Cluster: true})
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:     []string{"localhost:" + strings.TrimPrefix(s.Addr(), "127.0.0.1:")},
		TLSConfig: &tls.Config{ServerName: "localhost", RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
	})
	defer client.Close()
	for _, key := range []string{"a", "b", "c", "{x}1"} {
		if err := client.Set(t.Context(), key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s through the cluster client: %v", key, err)
		}
	}
	shards := 0
	err := client.ForEachShard(t.Context(), func(context.Context, *redis.Client) error {
		shards++
		return nil
	})
	if err != nil || shards != 1 {
		t.Errorf("ForEachShard: %d shards, %v; want 1", shards, err)
	}
}
