package config

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// RedisClientFromEnv reads REDIS_URL, REDIS_CLUSTER, REDIS_TIMEOUT and
// REDIS_TLS_CA_FILE through getenv (os.Getenv in production). A value that
// does not parse is reported in the returned error, naming the variable and
// the value, and replaced by its default: the returned config is always
// usable, and the error is for the log.
//
// REDIS_TLS_CA_FILE is the path of a PEM file of CA certificates that
// rediss:// servers must chain to, instead of the system roots: for a
// Redis behind a private CA. A file that cannot be read or holds no valid
// certificate is reported, and the system roots are used (so a server of
// that private CA is refused, never trusted unverified). A skip_verify
// parameter in REDIS_URL is reported and ignored.
func RedisClientFromEnv(getenv func(string) string) (redisclient.Config, error) {
	cfg := redisclient.Config{URL: strings.TrimSpace(getenv("REDIS_URL")), Timeout: DefaultRedisTimeout}
	var errs []error
	if v := strings.TrimSpace(getenv("REDIS_CLUSTER")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("REDIS_CLUSTER=%q: want true or false; using false", truncate.Text(v, 64)))
		}
		cfg.Cluster = b
	}
	if v := strings.TrimSpace(getenv("REDIS_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Minute {
			errs = append(errs, fmt.Errorf("REDIS_TIMEOUT=%q: want a Go duration between 0 and 1m, like 100ms; using %s", truncate.Text(v, 64), DefaultRedisTimeout))
		} else {
			cfg.Timeout = d
		}
	}
	if path := strings.TrimSpace(getenv("REDIS_TLS_CA_FILE")); path != "" {
		pool, err := loadCAFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("REDIS_TLS_CA_FILE=%q: %w; using the system roots", truncate.Text(path, 256), err))
		} else {
			cfg.RootCAs = pool
		}
		if cfg.URL != "" && !isTLSURL(cfg.URL) {
			errs = append(errs, fmt.Errorf("REDIS_TLS_CA_FILE=%q: REDIS_URL is not a rediss:// (TLS) URL, so the CA is not used", truncate.Text(path, 256)))
		}
	}
	if u, err := url.Parse(cfg.URL); err == nil && u.Query().Has("skip_verify") {
		// The URL is not quoted: it may hold a password.
		errs = append(errs, errors.New("REDIS_URL: the skip_verify parameter is ignored: the server's certificate is always verified (REDIS_TLS_CA_FILE trusts a private CA)"))
	}
	return cfg, errors.Join(errs...)
}

// maxCAFileSize bounds REDIS_TLS_CA_FILE: a CA bundle is kilobytes, and the
// whole file is read at cold start.
const maxCAFileSize = 1 << 20

// loadCAFile reads a PEM file of CA certificates into a new pool. Every
// CERTIFICATE block must parse, and there must be at least one.
func loadCAFile(path string) (*x509.CertPool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCAFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	if len(data) > maxCAFileSize {
		return nil, fmt.Errorf("read CA file: larger than %d bytes", maxCAFileSize)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the CA file: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate in the CA file")
	}
	return pool, nil
}

// isTLSURL reports whether a Redis URL asks for TLS.
func isTLSURL(rawURL string) bool {
	return len(rawURL) >= len("rediss://") && strings.EqualFold(rawURL[:len("rediss://")], "rediss://")
}
