package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/slidegate/slidegate/internal/config"
)

// Function is the operator function's handler: one ControlRequest per
// invocation, applied with ApplyControl on the functions' Redis, reached
// as Connect reaches it. Only IAM principals allowed lambda:InvokeFunction
// on it can invoke it, and CloudTrail records each invocation: that is the
// authoritative record of who changed a control (a request's By is what
// its sender asserts).
//
// The connection is made at the first invocation and kept while warm; a
// failed one is tried again at the next. Each change is logged with the
// identity's keyed hash, never the identity.
type Function struct {
	cfg    *config.Config
	opts   Options
	logger *slog.Logger

	mu   sync.Mutex
	conn *Conn
}

// NewFunction returns the handler for cfg. It does not connect.
func NewFunction(cfg *config.Config, opts Options, logger *slog.Logger) *Function {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Function{cfg: cfg, opts: opts, logger: logger}
}

// Invoke is the Lambda handler (aws-lambda-go's Handler): the payload as
// sent, so that nothing around the request is read past or dropped, and
// Handle's reply as JSON.
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	reply, err := f.Handle(ctx, payload)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(reply)
	if err != nil {
		return nil, fmt.Errorf("encode the reply: %w", err)
	}
	return out, nil
}

// Handle decodes one request strictly (DecodeControlRequest), applies it
// and returns the reply; a refused request or a failure is an error, which
// Lambda returns to the caller as the invocation's error message.
func (f *Function) Handle(ctx context.Context, payload []byte) (ControlReply, error) {
	req, err := DecodeControlRequest(payload)
	if err != nil {
		f.logger.LogAttrs(ctx, slog.LevelWarn, "operator request refused", slog.String("error", err.Error()))
		return ControlReply{}, err
	}
	conn, err := f.connect(ctx)
	if err != nil {
		f.logger.LogAttrs(ctx, slog.LevelError, "operator cannot reach Redis", slog.String("action", req.Action), slog.String("error", err.Error()))
		return ControlReply{}, fmt.Errorf("reach Redis: %w", err)
	}
	reply, err := ApplyControl(ctx, conn.Limiter, f.cfg.IPv6Prefix, req)
	attrs := []slog.Attr{slog.String("action", req.Action), slog.String("by", req.By)}
	switch {
	case req.Identity != "":
		attrs = append(attrs, slog.String("identity", conn.Hash(req.Identity)))
	case req.Network != "":
		attrs = append(attrs, slog.String("network", req.Network))
	}
	if err != nil {
		level := slog.LevelError
		if IsBadRequest(err) {
			level = slog.LevelWarn
		}
		f.logger.LogAttrs(ctx, level, "operator request failed", append(attrs, slog.String("error", err.Error()))...)
		return ControlReply{}, err
	}
	if req.Action != "list" && req.Action != "get" {
		attrs = append(attrs, slog.Bool("found", reply.Found))
		if c := reply.Control; c != nil {
			attrs = append(attrs, slog.String("kind", c.Kind), slog.Time("until", c.Until), slog.String("reason", c.Reason))
			if c.Factor != 0 {
				attrs = append(attrs, slog.Float64("factor", c.Factor))
			}
		}
		f.logger.LogAttrs(ctx, slog.LevelInfo, "live control changed", attrs...)
	}
	return reply, nil
}

// connect returns the warm connection, or makes it.
func (f *Function) connect(ctx context.Context) (*Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		return f.conn, nil
	}
	conn, err := Connect(ctx, f.cfg, f.opts)
	if err != nil {
		return nil, err
	}
	f.conn = conn
	return conn, nil
}

// Close closes the warm connection, if any.
func (f *Function) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return nil
	}
	err := f.conn.Close()
	f.conn = nil
	return err
}
