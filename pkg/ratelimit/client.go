package ratelimit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultTimeout is the whole Redis budget of one decision when
// REDIS_TIMEOUT is unset.
const DefaultTimeout = 100 * time.Millisecond

// connMaxIdleTime retires a pooled connection idle for longer, before it is
// used rather than after it fails. It stays below the 350 s after which AWS
// network paths (NAT gateways, Lambda's VPC interfaces) silently forget an
// idle TCP flow: a connection written into a forgotten flow gets no answer
// and no error until the budget runs out. Connections the server closed are
// caught anyway by go-redis's health check on every pool Get.
const connMaxIdleTime = 4 * time.Minute

// clusterStateReloadInterval bounds how stale a cluster client's slot map
// may grow while no command fails (go-redis's default is a minute).
const clusterStateReloadInterval = 10 * time.Second

// ClientConfig says how to reach Redis.
type ClientConfig struct {
	// URL is a redis:// or rediss:// (TLS) URL. For a cluster, more seed
	// nodes may be given as addr=host:port query parameters.
	URL string
	// Cluster selects the Redis Cluster protocol (ElastiCache cluster mode,
	// ElastiCache Serverless).
	Cluster bool
	// Timeout is the budget of one decision: it bounds dialing, TLS, the
	// command and any redirection. DefaultTimeout when zero.
	Timeout time.Duration
	// Password, when set, replaces the URL's password (the AUTH token read
	// from Secrets Manager in AWS). It is never logged.
	Password string
}

// ClientConfigFromEnv reads REDIS_URL, REDIS_CLUSTER and REDIS_TIMEOUT
// through getenv (os.Getenv in production). A value that does not parse is
// reported in the returned error, naming the variable and the value, and
// replaced by its default: the returned config is always usable, and the
// error is for the log.
func ClientConfigFromEnv(getenv func(string) string) (ClientConfig, error) {
	cfg := ClientConfig{URL: strings.TrimSpace(getenv("REDIS_URL")), Timeout: DefaultTimeout}
	var errs []error
	if v := strings.TrimSpace(getenv("REDIS_CLUSTER")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("REDIS_CLUSTER=%q: want true or false; using false", truncate(v, 64)))
		}
		cfg.Cluster = b
	}
	if v := strings.TrimSpace(getenv("REDIS_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Minute {
			errs = append(errs, fmt.Errorf("REDIS_TIMEOUT=%q: want a Go duration between 0 and 1m, like 100ms; using %s", truncate(v, 64), DefaultTimeout))
		} else {
			cfg.Timeout = d
		}
	}
	return cfg, errors.Join(errs...)
}

// NewClient builds the process-wide Redis client. It does not dial: the
// first command (or Limiter.LoadScripts) does, so a cold start with Redis
// down still returns a client that recovers when Redis comes back.
//
// The client never retries a command on its own (a retried EVALSHA whose
// reply was lost would spend twice); cluster redirections (MOVED, ASK) are
// followed. Every network step is bounded by the timeout, and the decision's
// context bounds the whole.
func NewClient(cfg ClientConfig) (redis.UniversalClient, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("new redis client: REDIS_URL is empty")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	noMaint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if cfg.Cluster {
		opt, err := redis.ParseClusterURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("new redis client: parse REDIS_URL: %w", redactURLError(err, cfg.URL))
		}
		if cfg.Password != "" {
			opt.Password = cfg.Password
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeout, timeout, timeout, timeout
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1
		opt.MaxRedirects = 3
		opt.DialerRetries = 1
		opt.DialerRetryTimeout = time.Millisecond
		opt.Protocol = 2
		opt.DisableIdentity = true
		opt.MaintNotificationsConfig = noMaint
		opt.ConnMaxIdleTime = connMaxIdleTime
		// A safety net only: the Gate asks for a reload on every failed
		// decision, since go-redis reloads the slot map on MOVED and ASK
		// but not when a node stops answering.
		opt.ClusterStateReloadInterval = clusterStateReloadInterval
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("new redis client: parse REDIS_URL: %w", redactURLError(err, cfg.URL))
	}
	if cfg.Password != "" {
		opt.Password = cfg.Password
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeout, timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	// One dial attempt: the budget has no room for go-redis's default of
	// five attempts 100 ms apart, and the next decision dials again anyway.
	opt.DialerRetries = 1
	opt.DialerRetryTimeout = time.Millisecond
	opt.Protocol = 2
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = noMaint
	opt.ConnMaxIdleTime = connMaxIdleTime
	return redis.NewClient(opt), nil
}

// redactURLError keeps a password in REDIS_URL out of error messages.
func redactURLError(err error, rawURL string) error {
	msg := err.Error()
	if i := strings.Index(rawURL, "@"); i > 0 {
		if j := strings.Index(rawURL, "://"); j >= 0 && j+3 < i {
			secret := rawURL[j+3 : i]
			if secret != "" {
				msg = strings.ReplaceAll(msg, secret, "REDACTED")
			}
		}
	}
	return errors.New(msg)
}
