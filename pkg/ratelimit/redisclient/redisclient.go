// Package redisclient builds the Redis client a ratelimit.Limiter decides
// on: TLS that always verifies, credentials from a provider (ElastiCache IAM
// authentication tokens), no retried commands, and every network step
// bounded by one timeout. Any go-redis client works with the Limiter; this
// one is what the slidegate functions use.
package redisclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// defaultTimeout is the budget of one decision when none is given, as
// Config.Timeout documents it (the same as ratelimit's Gate applies).
const defaultTimeout = 100 * time.Millisecond

// connMaxIdleTime retires a pooled connection idle for longer, before it is
// used rather than after it fails. It stays below the 350 s after which AWS
// network paths (NAT gateways, Lambda's VPC interfaces) silently forget an
// idle TCP flow: a connection written into a forgotten flow gets no answer
// and no error until the budget runs out. Connections the server closed are
// caught anyway by go-redis's health check on every pool Get (TLS ones too:
// see tlsDialer).
const connMaxIdleTime = 4 * time.Minute

// clusterStateReloadInterval bounds how stale a cluster client's slot map
// may grow while no command fails (go-redis's default is a minute).
const clusterStateReloadInterval = 10 * time.Second

// Config says how to reach Redis.
type Config struct {
	// URL is a redis:// or rediss:// (TLS) URL. For a cluster, more seed
	// nodes may be given as addr=host:port query parameters.
	URL string
	// Cluster selects the Redis Cluster protocol (ElastiCache cluster mode,
	// ElastiCache Serverless).
	Cluster bool
	// Timeout is the budget of one decision: it bounds dialing, TLS, the
	// command and any redirection. 100 ms when zero.
	Timeout time.Duration
	// Password, when set, replaces the URL's password (an AUTH token kept
	// apart from the URL, say in a secrets store). It is never logged.
	Password string
	// RootCAs are the certificate authorities a rediss:// server's
	// certificate must chain to; the system roots when nil (ElastiCache's
	// certificates chain to public Amazon roots). It has no effect on
	// redis:// URLs. Verification cannot be turned off.
	RootCAs *x509.CertPool
	// CredentialsProvider, when set, is called for every new connection,
	// before its first command, for the username and password it
	// authenticates with (HELLO, or AUTH before Redis 6), and then replaces
	// Password and the URL's credentials: it is for short-lived tokens such
	// as ElastiCache IAM authentication tokens. Its context is that of the
	// command that needed the connection, so the decision's budget bounds
	// it; an error fails that connection, and the decision with
	// the ratelimit package's ErrUnavailable. Connections already open
	// are not re-authenticated.
	// What it returns is never logged.
	CredentialsProvider func(ctx context.Context) (username, password string, err error)
	// ConnMaxLifetime, when positive, retires a pooled connection this old
	// at its next use, and a new one is dialed (and authenticated) instead:
	// ElastiCache closes IAM-authenticated connections after 12 hours. Zero
	// keeps connections for as long as they work.
	ConnMaxLifetime time.Duration
}

// New builds the process-wide Redis client. It does not dial: the
// first command (or ratelimit's Limiter.LoadScripts) does, so a cold start with Redis
// down still returns a client that recovers when Redis comes back.
//
// The client never retries a command on its own (a retried EVALSHA whose
// reply was lost would spend twice); cluster redirections (MOVED, ASK) are
// followed. Every network step is bounded by the timeout, and the decision's
// context bounds the whole.
//
// A rediss:// URL connects with TLS 1.2 or later and verifies the server's
// certificate against cfg.RootCAs (the system roots when nil) and the URL's
// host name, always: go-redis's skip_verify URL parameter is overridden. A
// cluster client verifies every node it is redirected to against the seed
// URL's host name (the configuration endpoint), as go-redis does, since a
// cluster may list its nodes by IP address.
func New(cfg Config) (redis.UniversalClient, error) {
	if cfg.URL == "" {
		return nil, errors.New("new redis client: the Redis URL is empty")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	rawURL := withoutSkipVerify(cfg.URL)
	noMaint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if cfg.Cluster {
		opt, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("new redis client: %w", urlError(err))
		}
		if cfg.Password != "" {
			opt.Password = cfg.Password
		}
		opt.CredentialsProviderContext = cfg.CredentialsProvider
		opt.TLSConfig = verifiedTLS(opt.TLSConfig, cfg.RootCAs)
		if opt.TLSConfig != nil {
			opt.Dialer = tlsDialer(opt.TLSConfig, timeout)
		}
		opt.ConnMaxLifetime = cfg.ConnMaxLifetime
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeout, timeout, timeout, timeout
		opt.ContextTimeoutEnabled = true
		opt.MaxRetries = -1
		opt.MaxRedirects = 3
		opt.DialerRetries = 1
		opt.DialerRetryTimeout = time.Millisecond
		// RESP2, never RESP3: the pool's check of a TLS connection before
		// reuse (checkableTLSConn) takes any byte waiting on the socket
		// for the server's close, which is right only while the server
		// sends nothing unasked (no RESP3 push notifications).
		// TestNewSpeaksRESP2 pins it.
		opt.Protocol = 2
		opt.DisableIdentity = true
		opt.MaintNotificationsConfig = noMaint
		opt.ConnMaxIdleTime = connMaxIdleTime
		// A safety net only: ratelimit's Gate asks for a reload on every failed
		// decision, since go-redis reloads the slot map on MOVED and ASK
		// but not when a node stops answering.
		opt.ClusterStateReloadInterval = clusterStateReloadInterval
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("new redis client: %w", urlError(err))
	}
	if cfg.Password != "" {
		opt.Password = cfg.Password
	}
	opt.CredentialsProviderContext = cfg.CredentialsProvider
	opt.TLSConfig = verifiedTLS(opt.TLSConfig, cfg.RootCAs)
	if opt.TLSConfig != nil {
		opt.Dialer = tlsDialer(opt.TLSConfig, timeout)
	}
	opt.ConnMaxLifetime = cfg.ConnMaxLifetime
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeout, timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	// One dial attempt: the budget has no room for go-redis's default of
	// five attempts 100 ms apart, and the next decision dials again anyway.
	opt.DialerRetries = 1
	opt.DialerRetryTimeout = time.Millisecond
	// RESP2: see the cluster client above (checkableTLSConn).
	opt.Protocol = 2
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = noMaint
	opt.ConnMaxIdleTime = connMaxIdleTime
	return redis.NewClient(opt), nil
}

// withoutSkipVerify removes go-redis's skip_verify parameter from a Redis
// URL (the cluster parser refuses it, the single-node one would turn
// verification off); any other URL is returned unchanged.
func withoutSkipVerify(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || !u.Query().Has("skip_verify") {
		return rawURL
	}
	q := u.Query()
	q.Del("skip_verify")
	u.RawQuery = q.Encode()
	return u.String()
}

// verifiedTLS returns the TLS configuration go-redis derived from a
// rediss:// URL (nil for redis://), with certificate verification on, TLS
// 1.2 at least, and roots as the trusted CAs. ServerName, the URL's host,
// is kept: it is what the certificate is checked against.
func verifiedTLS(c *tls.Config, roots *x509.CertPool) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	c.InsecureSkipVerify = false
	c.MinVersion = max(c.MinVersion, tls.VersionTLS12)
	c.RootCAs = roots
	return c
}

// tcpKeepAlive is go-redis's own keep-alive policy for the connections it
// dials: probes after 30 s idle, 5 s apart, the peer dead after 3 missed.
var tcpKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}

// tlsDialer dials TLS connections, handshake included, within the dial's
// context and timeout, and returns them as checkableTLSConn.
//
// go-redis checks a pooled connection for a close by the server before
// reusing it only when the connection exposes its socket (syscall.Conn),
// which a *tls.Conn does not. Without the check, the first command on a TLS
// connection the server has closed (a node replaced, a failover,
// ElastiCache ending an IAM-authenticated connection) fails with EOF, and
// as commands are not retried, so does its decision.
func tlsDialer(cfg *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &tls.Dialer{
		NetDialer: &net.Dialer{Timeout: timeout, KeepAliveConfig: tcpKeepAlive},
		Config:    cfg,
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc, ok := conn.(*tls.Conn)
		if !ok {
			return conn, nil
		}
		return checkableTLSConn{tc}, nil
	}
}

// checkableTLSConn is a TLS connection that exposes its TCP socket, so that
// go-redis's pool can peek at it before reusing the connection: end of
// stream, or any byte waiting (with RESP2 and no push notifications,
// nothing is sent unasked but a TLS close_notify alert), retires the
// connection and a new one is dialed. The peek never consumes anything.
// It relies on New's Protocol 2: under RESP3 the server may send push
// notifications unasked, and the pool then reads waiting data through the
// connection during the check instead of only peeking at the socket.
type checkableTLSConn struct {
	*tls.Conn
}

// SyscallConn returns the TCP socket's raw connection.
func (c checkableTLSConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.NetConn().(syscall.Conn)
	if !ok {
		return nil, errors.New("TLS connection over a transport without a socket")
	}
	return sc.SyscallConn()
}

// urlError is why the Redis URL does not parse, without any of the URL: a
// URL's password ends where the parser decides, so a password with '@',
// ':' or '/' in it may end up in the part the parser quotes back (a host,
// a port, a path, an escape sequence). Only the kind of fault is kept:
// net/url's and go-redis's messages quote values after a colon or in
// double quotes, and both are cut off.
func urlError(err error) error {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	msg = strings.TrimPrefix(msg, "redis: ")
	msg = strings.TrimPrefix(msg, "net/url: ")
	if i := strings.IndexAny(msg, ":\""); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = "not a URL"
	}
	return fmt.Errorf("the Redis URL does not parse: %s (the URL is not quoted, as it may hold a password; percent-encode any of @ : / ? # %% in its user name and password)", msg)
}
