package config_test

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestRedisClientFromEnvTLS: REDIS_TLS_CA_FILE is read into RootCAs; a bad
// file is reported naming the variable and the path and leaves the system
// roots in place (never "trust anything"); a skip_verify parameter is
// reported without quoting the URL, which may hold a password.
func TestRedisClientFromEnvTLS(t *testing.T) {
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
			cfg, err := config.RedisClientFromEnv(func(k string) string { return tc.env[k] })
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

func TestRedisClientFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := config.RedisClientFromEnv(env(map[string]string{"REDIS_URL": "redis://h:1", "REDIS_CLUSTER": "true", "REDIS_TIMEOUT": "250ms"}))
	if err != nil || !cfg.Cluster || cfg.Timeout != 250*time.Millisecond || cfg.URL != "redis://h:1" {
		t.Fatalf("good env: %+v, %v", cfg, err)
	}
	cfg, err = config.RedisClientFromEnv(env(map[string]string{"REDIS_CLUSTER": "yes please", "REDIS_TIMEOUT": "soon"}))
	if err == nil {
		t.Fatal("bad values not reported")
	}
	for _, name := range []string{"REDIS_CLUSTER", "REDIS_TIMEOUT", "soon"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	if cfg.Cluster || cfg.Timeout != config.DefaultRedisTimeout {
		t.Fatalf("bad values not replaced by defaults: %+v", cfg)
	}
}
