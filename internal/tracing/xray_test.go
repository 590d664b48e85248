//go:build !noxray && !otel

package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-xray-sdk-go/strategy/sampling"
	"github.com/aws/aws-xray-sdk-go/xray"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// receiveTimeout bounds the wait for a datagram the test knows is coming.
// It is a deadline for failing, never a duration anything is asserted on.
const receiveTimeout = 10 * time.Second

// Names the test looks for in what the daemon receives, and must never
// find there.
const (
	keyPrefix = "tracetest"
	identity  = "198.51.100.23"
)

// document is an X-Ray segment or subsegment as the daemon receives it.
type document struct {
	TraceID     string                    `json:"trace_id"`
	ID          string                    `json:"id"`
	ParentID    string                    `json:"parent_id"`
	Name        string                    `json:"name"`
	Type        string                    `json:"type"`
	Namespace   string                    `json:"namespace"`
	InProgress  bool                      `json:"in_progress"`
	Fault       bool                      `json:"fault"`
	Error       bool                      `json:"error"`
	Annotations map[string]any            `json:"annotations"`
	Metadata    map[string]map[string]any `json:"metadata"`
	Cause       *struct {
		Exceptions []struct {
			Message string `json:"message"`
		} `json:"exceptions"`
	} `json:"cause"`
	Subsegments []document `json:"subsegments"`
}

// datagram is one UDP datagram the fake daemon received, parsed.
type datagram struct {
	raw []byte
	doc document
	err error
}

// fakeDaemon is a UDP listener standing in for the X-Ray daemon.
type fakeDaemon struct {
	addr      string
	datagrams chan datagram
	// overflowed is set when a datagram was dropped for want of room.
	overflowed atomic.Bool
}

// startDaemon listens on a free loopback UDP port until t ends.
func startDaemon(t testing.TB) *fakeDaemon {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("listen as the x-ray daemon: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	d := &fakeDaemon{addr: conn.LocalAddr().String(), datagrams: make(chan datagram, 4096)}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return // closed by the cleanup
			}
			select {
			case d.datagrams <- parseDatagram(bytes.Clone(buf[:n])):
			default:
				d.overflowed.Store(true)
			}
		}
	}()
	return d
}

// parseDatagram reads the daemon's wire format: a JSON header line, then
// one segment or subsegment document.
func parseDatagram(raw []byte) datagram {
	head, body, ok := bytes.Cut(raw, []byte("\n"))
	if !ok {
		return datagram{raw: raw, err: fmt.Errorf("no header line in %q", raw)}
	}
	var header struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(head, &header); err != nil || header.Format != "json" || header.Version != 1 {
		return datagram{raw: raw, err: fmt.Errorf("header %q is not {\"format\":\"json\",\"version\":1} (%v)", head, err)}
	}
	var doc document
	if err := json.Unmarshal(body, &doc); err != nil {
		return datagram{raw: raw, err: fmt.Errorf("document %q: %w", body, err)}
	}
	return datagram{raw: raw, doc: doc}
}

// receiveUntil returns every document received until, and including, the
// first for which last is true, failing t if it does not come before the
// deadline.
func (d *fakeDaemon) receiveUntil(t testing.TB, last func(document) bool) []document {
	t.Helper()
	deadline := time.NewTimer(receiveTimeout)
	defer deadline.Stop()
	var docs []document
	for {
		select {
		case g := <-d.datagrams:
			if d.overflowed.Load() {
				t.Fatal("daemon dropped datagrams: more than the test can hold")
			}
			if g.err != nil {
				t.Fatalf("daemon received a bad datagram: %v", g.err)
			}
			for _, leak := range []string{keyPrefix, identity} {
				if bytes.Contains(g.raw, []byte(leak)) {
					t.Errorf("datagram holds %q, a key or an argument: %s", leak, g.raw)
				}
			}
			docs = append(docs, g.doc)
			if last(g.doc) {
				return docs
			}
		case <-deadline.C:
			t.Fatalf("daemon did not receive the expected document within %s; it received %d: %+v", receiveTimeout, len(docs), docs)
		}
	}
}

// recordingHandler is a slog handler that keeps every record, at every
// level.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// take returns the records kept so far, at level or above, and forgets
// them all.
func (h *recordingHandler) take(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Level >= level {
			line := r.Level.String() + " " + r.Message
			r.Attrs(func(a slog.Attr) bool {
				line += " " + a.String()
				return true
			})
			out = append(out, line)
		}
	}
	h.records = nil
	return out
}

// configure points the SDK at daemonAddr, with its messages going to the
// returned handler. The SDK's configuration is process-wide: these tests
// never run in parallel.
func configure(t testing.TB, daemonAddr string) *recordingHandler {
	t.Helper()
	// The environment would win over Options.DaemonAddr, or turn the SDK off.
	for _, v := range []string{"AWS_XRAY_DAEMON_ADDRESS", "AWS_XRAY_SDK_DISABLED", "AWS_XRAY_CONTEXT_MISSING"} {
		t.Setenv(v, "")
	}
	logs := &recordingHandler{}
	if err := tracing.Configure(tracing.Options{Logger: slog.New(logs), DaemonAddr: daemonAddr}); err != nil {
		t.Fatal(err)
	}
	return logs
}

// trace is the context of one traced piece of work, and how to make the
// SDK send what it holds for it.
type trace struct {
	ctx      context.Context
	traceID  string
	parentID string // the parent of every subsegment the work makes
	// flush makes the SDK send what is left of the trace, ending with one
	// document for which isLast is true.
	flush  func()
	isLast func(document) bool
}

// lambdaContext is an invocation's context as aws-lambda-go makes it: no
// segment, only the trace header Lambda sent.
func lambdaContext(header string) context.Context {
	//lint:ignore SA1029 aws-lambda-go's key is this plain string, and the SDK reads it so.
	return context.WithValue(context.Background(), xray.LambdaTraceHeaderKey, header)
}

// newLambdaTrace is the context of an invocation Lambda sampled. Each
// subsegment is sent as it closes; flush sends a marker subsegment after
// them.
func newLambdaTrace() trace {
	root, parent := xray.NewTraceID(), xray.NewSegmentID()
	ctx := lambdaContext("Root=" + root + ";Parent=" + parent + ";Sampled=1")
	marker := "marker-" + xray.NewSegmentID()
	return trace{
		ctx: ctx, traceID: root, parentID: parent,
		flush: func() {
			_, seg := xray.BeginSubsegment(ctx, marker)
			seg.Close(nil)
		},
		isLast: func(d document) bool { return d.Name == marker },
	}
}

// sampleAll samples every segment, so that segments begun by tests are
// sent whatever the SDK's default rules say, without asking a daemon.
type sampleAll struct{}

func (sampleAll) ShouldTrace(*sampling.Request) *sampling.Decision {
	return &sampling.Decision{Sample: true}
}

// newSegmentTrace is a context holding a segment, as an SDK HTTP handler
// or xray.BeginSegment makes outside Lambda. Subsegments travel inside
// their segment, sent when flush closes it.
//
// The SDK also closes a segment from a goroutine of its own when the
// segment's context ends, and Close ends that context: the goroutine and
// Close then race, and the segment can be sent twice. flush therefore ends
// the context first, once every call has returned, and waits until the SDK
// has noticed (and, the segment being in progress, sent nothing) before it
// closes the segment.
func newSegmentTrace(t testing.TB) trace {
	t.Helper()
	if err := xray.Configure(xray.Config{SamplingStrategy: sampleAll{}}); err != nil {
		t.Fatal(err)
	}
	base, cancel := context.WithCancel(context.Background())
	ctx, seg := xray.BeginSegment(base, "slidegate-test")
	return trace{
		ctx: ctx, traceID: seg.TraceID, parentID: seg.ID,
		flush: func() {
			cancel()
			deadline := time.Now().Add(receiveTimeout)
			for !contextDone(seg) {
				if time.Now().After(deadline) {
					t.Fatalf("the SDK did not notice the end of the segment's context within %s", receiveTimeout)
				}
				time.Sleep(time.Millisecond)
			}
			seg.Close(nil)
		},
		isLast: func(d document) bool { return d.ID == seg.ID },
	}
}

// contextDone reports whether the SDK has seen seg's context end.
func contextDone(seg *xray.Segment) bool {
	seg.RLock()
	defer seg.RUnlock()
	return seg.ContextDone
}

// redisCalls returns the subsegments of Redis calls among docs and their
// children, in the order they were sent (made, within a segment).
func redisCalls(docs []document) []document {
	var calls []document
	for _, d := range docs {
		if d.Name == "redis" {
			calls = append(calls, d)
		}
		calls = append(calls, redisCalls(d.Subsegments)...)
	}
	return calls
}

// wantCall is what the subsegment of one Redis call should say.
type wantCall struct {
	command string
	outcome string
	tier    string // "" for no tier annotation
	fault   bool   // no answer: the server is down
	err     bool   // Redis answered with an error
}

func (w wantCall) String() string {
	return fmt.Sprintf("%s tier=%q outcome=%s fault=%v error=%v", w.command, w.tier, w.outcome, w.fault, w.err)
}

// checkCalls compares the Redis subsegments of one trace with what it
// should hold, call by call.
func checkCalls(t *testing.T, tr trace, docs []document, want []wantCall) {
	t.Helper()
	for _, d := range docs {
		if d.TraceID != tr.traceID && !tr.isLast(d) {
			t.Errorf("a document of another trace arrived: %+v", d)
		}
	}
	calls := redisCalls(docs)
	if len(calls) != len(want) {
		t.Fatalf("got %d redis subsegments, want exactly one per call, %d: %v\ngot: %+v", len(calls), len(want), want, calls)
	}
	for i, c := range calls {
		w := want[i]
		got := wantCall{fault: c.Fault, err: c.Error}
		got.command, _ = c.Metadata["redis"]["command"].(string)
		got.outcome, _ = c.Annotations["outcome"].(string)
		got.tier, _ = c.Annotations["tier"].(string)
		if got != w {
			t.Errorf("call %d: subsegment says %v, want %v", i, got, w)
		}
		if c.Namespace != "remote" || c.InProgress || c.TraceID != tr.traceID || c.ParentID != tr.parentID {
			t.Errorf("call %d: namespace %q, in progress %v, trace %s, parent %s; want remote, closed, trace %s, parent %s",
				i, c.Namespace, c.InProgress, c.TraceID, c.ParentID, tr.traceID, tr.parentID)
		}
		if failed := w.fault || w.err; failed != (c.Cause != nil && len(c.Cause.Exceptions) > 0) {
			t.Errorf("call %d: cause %+v, want an exception only when the call failed", i, c.Cause)
		}
	}
}

// newClient is a production Redis client (ratelimit.NewClient) for cfg,
// with a budget roomy enough for a loaded test machine, closed when t ends.
func newClient(t testing.TB, cfg redisclient.Config) redis.UniversalClient {
	t.Helper()
	cfg.Timeout = 5 * time.Second
	client, err := redisclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// newLimiter is a Limiter on client whose keys start with keyPrefix.
func newLimiter(t testing.TB, client redis.UniversalClient) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: keyPrefix})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEachRedisCallIsOneAnnotatedSubsegment runs real decisions against a
// real server with the daemon replaced by a UDP listener, in both ways a
// trace reaches the hook, and checks every Redis call's subsegment.
func TestEachRedisCallIsOneAnnotatedSubsegment(t *testing.T) {
	check := ratelimit.Check{Identity: identity, Limit: ratelimit.Limit{Name: "user", Count: 2, Window: time.Minute}}
	modes := []struct {
		name     string
		newTrace func(t *testing.T) trace
	}{
		{"lambda invocation with a sampled trace header", func(*testing.T) trace { return newLambdaTrace() }},
		{"segment in the context", func(t *testing.T) trace { return newSegmentTrace(t) }},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			daemon := startDaemon(t)
			logs := configure(t, daemon.addr)
			server := redistest.StartServer(t)
			admin := server.Client(t)
			client := newClient(t, redisclient.Config{URL: server.URL()})
			tracing.Instrument(client)
			limiter := newLimiter(t, client)
			decide := func(tier string) func(ctx context.Context) error {
				return func(ctx context.Context) error {
					_, err := limiter.Decide(tracing.WithTier(ctx, tier), 1, check)
					return err
				}
			}

			steps := []struct {
				name    string
				setup   func(t *testing.T) // untraced
				run     func(ctx context.Context) error
				wantErr bool
				want    []wantCall
			}{
				{
					name: "scripts load on a new connection: one subsegment per SCRIPT LOAD, none for the connection's HELLO",
					run:  func(ctx context.Context) error { return limiter.LoadScripts(ctx) },
					// One per script: the four algorithm files (the fixed window is the sliding window's), the mixed one, and
					// the concurrency limiter's acquire and release.
					want: slices.Repeat([]wantCall{{command: "SCRIPT", outcome: "ok"}}, 7),
				},
				{
					name: "first decision is allowed",
					run:  decide("user"),
					want: []wantCall{{command: "EVALSHA", outcome: "allowed", tier: "user"}},
				},
				{
					name: "second decision is allowed",
					run:  decide("user"),
					want: []wantCall{{command: "EVALSHA", outcome: "allowed", tier: "user"}},
				},
				{
					name: "over the limit is denied",
					run:  decide("user"),
					want: []wantCall{{command: "EVALSHA", outcome: "denied", tier: "user"}},
				},
				{
					name: "a pipeline is one call",
					run: func(ctx context.Context) error {
						_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
							p.Ping(ctx)
							p.Time(ctx)
							return nil
						})
						return err
					},
					want: []wantCall{{command: "PIPELINE", outcome: "ok"}},
				},
				{
					name: "flushed script cache: NOSCRIPT is an error, then EVAL decides",
					setup: func(t *testing.T) {
						if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
							t.Fatal(err)
						}
					},
					run: decide("org"),
					want: []wantCall{
						{command: "EVALSHA", outcome: "error", tier: "org", err: true},
						{command: "EVAL", outcome: "denied", tier: "org"},
					},
				},
				{
					name:    "server stopped: the call fails with a fault",
					setup:   func(*testing.T) { server.Stop() },
					run:     decide("anonymous"),
					wantErr: true,
					want:    []wantCall{{command: "EVALSHA", outcome: "error", tier: "anonymous", fault: true}},
				},
			}
			for _, s := range steps {
				t.Run(s.name, func(t *testing.T) {
					if s.setup != nil {
						s.setup(t)
					}
					tr := mode.newTrace(t)
					err := s.run(tr.ctx)
					if (err != nil) != s.wantErr {
						t.Fatalf("call error = %v, want an error: %v", err, s.wantErr)
					}
					tr.flush()
					checkCalls(t, tr, daemon.receiveUntil(t, tr.isLast), s.want)
					if logged := logs.take(slog.LevelInfo); len(logged) > 0 {
						t.Errorf("the SDK logged above debug level: %q", logged)
					}
				})
			}
		})
	}
}

// TestUntracedCallsSendAndLogNothing checks that without a sampled trace
// in the context (tests, `make local`, an invocation Lambda did not
// sample) the hook stays out of the way: nothing reaches the daemon, the
// SDK logs nothing at any level, and WithTier adds nothing.
func TestUntracedCallsSendAndLogNothing(t *testing.T) {
	daemon := startDaemon(t)
	logs := configure(t, daemon.addr)
	server := redistest.StartServer(t)
	refused := refusedAddr(t)
	check := ratelimit.Check{Identity: identity, Limit: ratelimit.Limit{Name: "anonymous", Count: 2, Window: time.Minute}}

	root, parent := xray.NewTraceID(), xray.NewSegmentID()
	contexts := []struct {
		name string
		ctx  context.Context
	}{
		{"no segment and no trace header", context.Background()},
		{"empty trace header", lambdaContext("")},
		{"trace header of an unsampled invocation", lambdaContext("Root=" + root + ";Parent=" + parent + ";Sampled=0")},
	}
	for _, c := range contexts {
		t.Run(c.name, func(t *testing.T) {
			logs.take(slog.LevelDebug) // Configure's own messages
			if got := tracing.WithTier(c.ctx, "anonymous"); got != c.ctx {
				t.Error("WithTier derived a context although nothing is traced")
			}

			client := newClient(t, redisclient.Config{URL: server.URL()})
			tracing.Instrument(client)
			limiter := newLimiter(t, client)
			if err := limiter.LoadScripts(c.ctx); err != nil {
				t.Fatal(err)
			}
			ctx := tracing.WithTier(c.ctx, "anonymous")
			for range 3 { // allowed, allowed, denied
				if _, err := limiter.Decide(ctx, 1, check); err != nil {
					t.Fatal(err)
				}
			}
			down := newClient(t, redisclient.Config{URL: "redis://" + refused})
			tracing.Instrument(down)
			if _, err := newLimiter(t, down).Decide(ctx, 1, check); !errors.Is(err, ratelimit.ErrUnavailable) {
				t.Fatalf("decision on a refused connection: %v, want ErrUnavailable", err)
			}
			if logged := logs.take(slog.LevelDebug); len(logged) > 0 {
				t.Errorf("the SDK logged for untraced calls: %q", logged)
			}

			// Whatever was sent is in the daemon's socket before a traced
			// marker sent after it.
			marker := newLambdaTrace()
			marker.flush()
			if docs := daemon.receiveUntil(t, marker.isLast); len(docs) != 1 {
				t.Errorf("untraced calls sent %d documents: %+v", len(docs)-1, docs[:len(docs)-1])
			}
		})
	}
}

// TestTracedCallsWithoutDaemonStaySilent checks that a sampled trace with
// no daemon listening (a local run that passes a trace header) costs
// failed writes and debug lines, never an error or a log line above debug,
// and that the SDK's own debug chatter is not logged at all.
func TestTracedCallsWithoutDaemonStaySilent(t *testing.T) {
	logs := configure(t, refusedUDPAddr(t))
	server := redistest.StartServer(t)
	client := newClient(t, redisclient.Config{URL: server.URL()})
	tracing.Instrument(client)
	limiter := newLimiter(t, client)
	check := ratelimit.Check{Identity: identity, Limit: ratelimit.Limit{Name: "anonymous", Count: 2, Window: time.Minute}}
	for i := range 5 {
		tr := newLambdaTrace()
		if _, err := limiter.Decide(tracing.WithTier(tr.ctx, "anonymous"), 1, check); err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
	}
	logged := logs.take(slog.LevelDebug)
	if !slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, "sdkLevel=ERROR") }) {
		t.Errorf("the SDK's failed sends do not reach the logger at debug level: %q", logged)
	}
	// The SDK's own debug messages (a segment document per send) are
	// dropped.
	if slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, "sdkLevel=DEBUG") }) {
		t.Errorf("the SDK's debug messages reach the logger: %q", logged)
	}
	for _, l := range logged {
		if !strings.HasPrefix(l, "DEBUG ") {
			t.Errorf("the SDK logged above debug level without a daemon: %q", l)
		}
	}
}

// refusedAddr is a loopback TCP address nothing listens on.
func refusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// refusedUDPAddr is a loopback UDP address nothing listens on.
func refusedUDPAddr(t testing.TB) string {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := conn.LocalAddr().String()
	conn.Close()
	return addr
}
