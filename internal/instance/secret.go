package instance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// secretRetryInterval is how long after a failed read of a secret the next
// one may start: Secrets Manager throttles an account's requests past a
// per-second quota, which many warm instances, each retrying on every
// request or new connection, would only make worse.
const secretRetryInterval = 30 * time.Second

// pacedSecret is a Secrets Manager secret that is read again after a failed
// read, when something needs it, at most once per interval: the Redis AUTH
// token (REDIS_AUTH_SECRET_ARN) and the identity hash key
// (RATE_LIMIT_HASH_KEY_SECRET_ARN). A read starts only when none is under
// way, the secret is not read yet, and the last read failed interval ago
// or more; it goes on when whoever started it stops waiting (bounded by
// awsclients.SecretReadTimeout). Each read's outcome is logged, never the secret. It
// is safe for concurrent use.
type pacedSecret struct {
	arn      string
	read     func(ctx context.Context, arn string) (string, error)
	interval time.Duration
	// use checks and installs a secret that was read; its error fails the
	// read. Nil accepts every secret.
	use    func(secret string) error
	logger *slog.Logger
	// failedLog and readLog are the messages of a failed and a successful
	// read.
	failedLog, readLog string

	mu       sync.Mutex
	value    string      // "" until read
	failedAt time.Time   // when the last read failed
	reading  *secretRead // the read under way, if any
}

// secretRead is one read of a pacedSecret; value (on success) and err are
// set before done is closed.
type secretRead struct {
	done  chan struct{}
	value string
	err   error
}

// start returns the read under way, or starts one if one is due. It
// returns nil when the secret is read (value holds it) or when the last
// read failed less than interval ago (since says how long ago).
func (s *pacedSecret) start(ctx context.Context) (r *secretRead, value string, since time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.value != "" {
		return nil, s.value, 0
	}
	if s.reading != nil {
		return s.reading, "", 0
	}
	if !s.failedAt.IsZero() {
		if since := time.Since(s.failedAt); since >= 0 && since < s.interval {
			return nil, "", since
		}
	}
	r = &secretRead{done: make(chan struct{})}
	s.reading = r
	go s.readInBackground(context.WithoutCancel(ctx), r)
	return r, "", 0
}

// readInBackground reads the secret (within awsclients.SecretReadTimeout), logs the
// outcome, keeps the secret, and ends r.
func (s *pacedSecret) readInBackground(ctx context.Context, r *secretRead) {
	secret, err := s.read(ctx, s.arn)
	if err == nil && s.use != nil {
		err = s.use(secret)
	}
	// The outcome is logged before the secret is served, so that the line
	// comes before anything done with it.
	if err != nil {
		s.logger.LogAttrs(ctx, slog.LevelError, s.failedLog,
			slog.String("error", err.Error()),
			slog.Duration("retryInterval", s.interval))
	} else {
		s.logger.LogAttrs(ctx, slog.LevelInfo, s.readLog)
	}
	s.mu.Lock()
	if err == nil {
		s.value = secret
	} else {
		s.failedAt = time.Now()
	}
	if err == nil {
		r.value = secret
	}
	r.err = err
	s.reading = nil
	s.mu.Unlock()
	close(r.done)
}

// retryInterval is interval, or secretRetryInterval when it is not
// positive.
func retryInterval(interval time.Duration) time.Duration {
	if interval <= 0 {
		return secretRetryInterval
	}
	return interval
}
