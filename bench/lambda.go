package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// exampleAPIKeyHash is the SHA-256 of the example API key of
// mk/functions.mk; setting it keeps the authorizer from listing API Gateway
// keys through AWS during the measurement.
const exampleAPIKeyHash = "1f3fda5b3594c211778c561901737661ca21e8ebcf1ac1a3d60f006c470129f8"

// lambdaInfo holds the Lambda figures, or why they are missing.
type lambdaInfo struct {
	Measured           bool             `json:"measured"`
	Note               string           `json:"note"`
	BootstrapBytes     map[string]int64 `json:"bootstrap_bytes,omitempty"` // function -> size, linux/arm64
	ColdStartMs        []float64        `json:"cold_start_ms,omitempty"`
	WarmP50us          float64          `json:"warm_invocation_p50_us,omitempty"`
	WarmP99us          float64          `json:"warm_invocation_p99_us,omitempty"`
	RedisP50us         float64          `json:"redis_round_trip_p50_us,omitempty"`
	WarmOverheadP50us  float64          `json:"warm_overhead_p50_us,omitempty"`
	AllocsPerDecision  float64          `json:"allocs_per_decision_limiter,omitempty"`
	AllocsPerGate      float64          `json:"allocs_per_decision_gate,omitempty"`
	BytesPerDecision   float64          `json:"alloc_bytes_per_decision_limiter,omitempty"`
	Event              string           `json:"event,omitempty"`
	ColdStartsMeasured int              `json:"cold_starts,omitempty"`
	// Answer is the last warm invocation's answer, to show it was a real
	// decision (Allow from Redis, not degraded).
	Answer string `json:"answer,omitempty"`
	// ColdStart compares the authorizer's cold start, in both tracer
	// builds, with a minimal aws-lambda-go function's (coldstart.go).
	ColdStart *coldStartInfo `json:"cold_start_compare,omitempty"`
}

// runLambda measures what a decision costs inside a Lambda function:
// bootstrap sizes (linux/arm64, as deployed), cold start (emulator started,
// first invocation sent, until its answer: the function's process start,
// its init with the Redis client and scripts, and one decision) and warm
// invocation time beyond one Redis round trip, under the Runtime Interface
// Emulator of bin/aws-lambda-rie; and allocations per decision in process.
func runLambda(ctx context.Context, b *bench, root, redisAddr string, p *progress) lambdaInfo {
	info := lambdaInfo{BootstrapBytes: map[string]int64{}, Event: "events/authorizer-anonymous.json"}
	root, err := filepath.Abs(root)
	if err != nil {
		info.Note = err.Error()
		return info
	}
	p.set("lambda: allocations per decision")
	info.AllocsPerDecision, info.BytesPerDecision, info.AllocsPerGate, err = allocsPerDecision(ctx, b.client)
	if err != nil {
		info.Note = err.Error()
		return info
	}

	tmp, err := os.MkdirTemp("", "slidegate-bench-lambda-")
	if err != nil {
		info.Note = "temp dir: " + err.Error()
		return info
	}
	defer os.RemoveAll(tmp)
	for _, fn := range []string{"authorizer", "api"} {
		// The tracer builds: the default (X-Ray), TRACER=none and TRACER=otel.
		for _, tags := range []string{"", "noxray", "otel"} {
			name := fn
			if tags != "" {
				name += "-" + tags
			}
			p.set("lambda: building the " + name + " bootstrap (linux/arm64)")
			out := filepath.Join(tmp, "arm64-"+name)
			if err := buildBootstrap(ctx, root, "./functions/"+fn, out, "linux", "arm64", tags); err != nil {
				info.Note = err.Error()
				return info
			}
			st, err := os.Stat(out)
			if err != nil {
				info.Note = err.Error()
				return info
			}
			info.BootstrapBytes[name] = st.Size()
		}
	}

	rie := filepath.Join(root, "bin", "aws-lambda-rie")
	if _, err := os.Stat(rie); err != nil {
		info.Note = "bootstrap sizes only: bin/aws-lambda-rie is missing (`make rie` builds it), so cold start and warm overhead were not measured"
		return info
	}
	p.set("lambda: building the authorizer bootstrap for this machine")
	hostDir := filepath.Join(tmp, "host")
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		info.Note = err.Error()
		return info
	}
	boot := filepath.Join(hostDir, "bootstrap")
	if err := buildBootstrap(ctx, root, "./functions/authorizer", boot, runtime.GOOS, runtime.GOARCH, ""); err != nil {
		info.Note = err.Error()
		return info
	}
	event, err := os.ReadFile(filepath.Join(root, info.Event))
	if err != nil {
		info.Note = err.Error()
		return info
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_LAMBDA_FUNCTION_TIMEOUT=30",
		"REDIS_URL=redis://" + redisAddr,
		"API_KEY_HASHES=" + exampleAPIKeyHash,
		// Every invocation must reach Redis: a denied caller would be
		// answered from the deny cache instead.
		"RATE_LIMIT_ANONYMOUS=1000000/1m",
	}
	const colds, warm = 5, 300
	var warmLat []int64
	for i := 0; i < colds; i++ {
		p.set(fmt.Sprintf("lambda: cold start %d/%d under the emulator", i+1, colds))
		inst, err := startRIE(rie, boot, env)
		if err != nil {
			info.Note = err.Error()
			return info
		}
		t0 := time.Now()
		_, err = inst.invoke(ctx, event)
		cold := time.Since(t0)
		if err != nil {
			inst.stop()
			info.Note = "first invocation: " + err.Error()
			return info
		}
		info.ColdStartMs = append(info.ColdStartMs, float64(cold.Microseconds())/1e3)
		if i == colds-1 {
			p.set("lambda: warm invocations")
			for j := 0; j < warm; j++ {
				t0 := time.Now()
				body, err := inst.invoke(ctx, event)
				if err != nil {
					inst.stop()
					info.Note = "warm invocation: " + err.Error()
					return info
				}
				warmLat = append(warmLat, int64(time.Since(t0)))
				info.Answer = string(body)
			}
		}
		inst.stop()
	}
	info.ColdStart, err = compareColdStarts(ctx, root, rie, tmp, env, event, coldStartRounds, p)
	if err != nil {
		info.Note = "cold-start comparison: " + err.Error()
		return info
	}
	slices.Sort(warmLat)
	info.WarmP50us = percentile(warmLat, 0.5) / 1e3
	info.WarmP99us = percentile(warmLat, 0.99) / 1e3

	// One Redis round trip of the same decision, from this process.
	lim, _ := ratelimit.NewLimiter(b.client, ratelimit.Options{})
	var rt []int64
	for j := 0; j < warm; j++ {
		t0 := time.Now()
		if _, err := lim.Decide(ctx, 1, ratelimit.Check{Identity: "lambda-rt", Limit: ratelimit.Limit{Name: "anonymous", Count: 1_000_000, Window: time.Minute}}); err != nil {
			info.Note = "redis round trip: " + err.Error()
			return info
		}
		rt = append(rt, int64(time.Since(t0)))
	}
	slices.Sort(rt)
	info.RedisP50us = percentile(rt, 0.5) / 1e3
	info.WarmOverheadP50us = info.WarmP50us - info.RedisP50us
	info.ColdStartsMeasured = colds
	info.Measured = true
	info.Note = "measured by this run under the Runtime Interface Emulator (bin/aws-lambda-rie) on this machine"
	return info
}

// allocsPerDecision counts heap allocations per decision in this process,
// for Limiter.Decide and for Gate.Decide (go-redis's included).
func allocsPerDecision(ctx context.Context, c *redis.Client) (allocs, bytes, gateAllocs float64, err error) {
	l, err := ratelimit.NewLimiter(c, ratelimit.Options{})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("allocations: %w", err)
	}
	g := ratelimit.NewGate(l, ratelimit.GateOptions{})
	limit := ratelimit.Limit{Name: "user", Count: 1_000_000, Window: time.Minute}
	const n = 5000
	measure := func(f func() error) (float64, float64, error) {
		for i := 0; i < 100; i++ { // warm the pool and the script cache
			if err := f(); err != nil {
				return 0, 0, err
			}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < n; i++ {
			if err := f(); err != nil {
				return 0, 0, err
			}
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n, nil
	}
	allocs, bytes, err = measure(func() error {
		_, err := l.Decide(ctx, 1, ratelimit.Check{Identity: "alloc-user", Limit: limit})
		return err
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("allocations: %w", err)
	}
	gateAllocs, _, err = measure(func() error {
		_, err := g.Decide(ctx, 1, ratelimit.FailOpen, ratelimit.Check{Identity: "alloc-user", Limit: limit})
		return err
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("allocations: %w", err)
	}
	return allocs, bytes, gateAllocs, nil
}

// buildBootstrap builds the main package pkg of the module in dir as
// `make build` does (static, -tags lambda.norpc, stripped), with the build
// tags in tags as well (comma-separated; "" for none).
func buildBootstrap(ctx context.Context, dir, pkg, out, goos, goarch, tags string) error {
	allTags := "lambda.norpc"
	if tags != "" {
		allTags += "," + tags
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", allTags, "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s (tags %s) for %s/%s: %w\n%s", pkg, allTags, goos, goarch, err, msg)
	}
	return nil
}

// rieInstance is one emulator running one function: one Lambda instance.
type rieInstance struct {
	addr string
	cmd  *exec.Cmd
	logs *bytes.Buffer
	// exited is closed when the emulator has exited and been waited for.
	exited chan struct{}
}

// startRIE starts the emulator on free ports; the emulator starts the
// bootstrap on the first invocation, as Lambda does on a cold start. A
// port found free can be taken by another process before the emulator
// binds it (the machine is shared): an emulator that exits before it
// listens is started again on other ports, three times at most.
func startRIE(rie, bootstrap string, env []string) (*rieInstance, error) {
	var err error
	for range 3 {
		var inst *rieInstance
		var exited bool
		if inst, exited, err = startRIEOnce(rie, bootstrap, env); !exited {
			return inst, err
		}
	}
	return nil, err
}

// startRIEOnce starts the emulator once, and reports whether it exited
// before listening.
func startRIEOnce(rie, bootstrap string, env []string) (*rieInstance, bool, error) {
	port, err := freePort()
	if err != nil {
		return nil, false, err
	}
	apiPort, err := freePort()
	if err != nil {
		return nil, false, err
	}
	inst := &rieInstance{addr: "127.0.0.1:" + strconv.Itoa(port), logs: &bytes.Buffer{}}
	inst.cmd = exec.Command(rie,
		"--runtime-interface-emulator-address", inst.addr,
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(apiPort),
		"--log-level", "error", bootstrap)
	inst.cmd.Dir = filepath.Dir(bootstrap)
	inst.cmd.Env = env
	inst.cmd.Stdout, inst.cmd.Stderr = io.Discard, inst.logs
	// Its own process group, so that stop ends the bootstrap it starts too.
	inst.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := inst.cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("start the emulator: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		// Only this goroutine waits for the process; stop waits on exited.
		_ = inst.cmd.Wait()
		close(exited)
	}()
	inst.exited = exited
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + inst.addr + "/")
		if err == nil {
			resp.Body.Close()
			return inst, false, nil
		}
		select {
		case <-exited:
			return nil, true, fmt.Errorf("the emulator exited before listening on %s: %.300s", inst.addr, inst.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			inst.stop()
			return nil, false, fmt.Errorf("the emulator did not listen on %s: %w", inst.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *rieInstance) invoke(ctx context.Context, event []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"http://"+r.addr+"/2015-03-31/functions/function/invocations", bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"errorType"`)) {
		return nil, fmt.Errorf("invoke: HTTP %d: %.300s", resp.StatusCode, body)
	}
	return body, nil
}

// stop ends the emulator this program started (and with it the bootstrap,
// its child).
func (r *rieInstance) stop() {
	if r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.exited
	}
}
