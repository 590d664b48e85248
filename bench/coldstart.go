package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// coldStartTargetMs is the bound on how much later than a minimal
// aws-lambda-go function the authorizer built with TRACER=none (build tag
// noxray) may give its first answer. The default build, with the X-Ray
// SDK, has no bound: its cost is reported as it is, the SDK's own package
// initialisation named (xrayInitCost).
const coldStartTargetMs = 5

// coldStartTargetName names the cold-start target in the report.
const coldStartTargetName = "cold start (first answer under the emulator), TRACER=none"

// coldBuild is one bootstrap of the cold-start comparison.
type coldBuild struct {
	Name string `json:"name"`
	// Tags are the build tags beyond lambda.norpc.
	Tags string `json:"tags,omitempty"`
	// Arm64Bytes is the size of the linux/arm64 stripped bootstrap, as
	// `make build` makes it.
	Arm64Bytes int64 `json:"arm64_bytes"`
	// InitMs is the package initialisation of the bootstrap built for this
	// machine (GODEBUG=inittrace=1, the clock times of every package
	// summed), one figure per run.
	InitMs []float64 `json:"init_ms"`
	// InitTop are the packages whose initialisation costs the most, by
	// their median over the runs.
	InitTop []pkgInit `json:"init_top,omitempty"`
	// FirstAnswerMs is, per round, the time from sending a fresh emulator
	// its first invocation to the answer: the bootstrap's process start,
	// its initialisation, main's cold start and one invocation.
	FirstAnswerMs []float64 `json:"first_answer_ms"`
	// AfterMinimalMs is, per round, FirstAnswerMs less the minimal
	// function's in the same round (0 for the minimal function itself).
	AfterMinimalMs []float64 `json:"after_minimal_ms"`
	// Answer is the first answer of the last round.
	Answer string `json:"answer,omitempty"`
	// DecisionUs is, per round, the median time of warmRounds warm
	// invocations of the same instance after its first answer, each a
	// decision on Redis in a trace Lambda sampled (a sampled trace header
	// on every invocation): what a traced decision costs with this build's
	// tracer, subsegments or spans sent to a local sink (see
	// startTraceSinks).
	DecisionUs []float64 `json:"decision_us,omitempty"`

	pkg, dir, hostPath string
}

// pkgInit is one package's initialisation time.
type pkgInit struct {
	Package string  `json:"package"`
	Ms      float64 `json:"ms"`
}

// coldStartInfo is the cold-start comparison: a minimal aws-lambda-go
// function and the authorizer in its three tracer builds, in one run.
type coldStartInfo struct {
	Rounds int          `json:"rounds"`
	Builds []*coldBuild `json:"builds"`
	// XRayInit is what the X-Ray SDK's packages cost the default build's
	// package initialisation, from the same init traces.
	XRayInit *xrayInitCost `json:"xray_init,omitempty"`
	// NoneAWSSDKInitMs is, per init run of the TRACER=none build, the
	// clock times of its AWS SDK for Go v2 packages (aws-sdk-go-v2 and
	// smithy-go) summed: the Secrets Manager and API Gateway clients and
	// the default configuration loader.
	NoneAWSSDKInitMs []float64 `json:"none_aws_sdk_init_ms,omitempty"`
}

// xrayInitCost is the package initialisation the X-Ray SDK brings into the
// default build: the packages of its init trace that the TRACER=none
// build's does not have (the SDK, aws-sdk-go v1, gRPC, protobuf and the
// rest it imports).
type xrayInitCost struct {
	// Packages is how many packages only the default build initialises.
	Packages int `json:"packages"`
	// Ms is, per init run of the default build, those packages' clock
	// times summed.
	Ms []float64 `json:"ms"`
	// Top are the costliest of them, by their median over the runs.
	Top []pkgInit `json:"top,omitempty"`
}

// build is the comparison's build with these tags ("" for the default),
// or nil.
func (c *coldStartInfo) build(tags string, minimal bool) *coldBuild {
	if c == nil {
		return nil
	}
	for _, b := range c.Builds {
		if b.Tags == tags && (b.pkg == "./minimal" || strings.HasPrefix(b.Name, "minimal")) == minimal {
			return b
		}
	}
	return nil
}

// compareColdStarts builds the minimal function and the authorizer with
// and without X-Ray, for linux/arm64 (sizes) and for this machine (init
// traces, first answers), then measures each build's first answer under a
// fresh emulator, rounds times, the builds in a rotating order within each
// round so that drift on a shared machine falls on all of them.
// coldStartRounds is how many rounds of first answers compareColdStarts
// takes: the rounds' differences with the minimal function moved by 1.5 to
// 3 ms between runs of 9 rounds on the shared bench machine (the same
// code: 5.8 and 8.6 ms after minimal within an hour); a round costs about
// a second.
const coldStartRounds = 21

func compareColdStarts(ctx context.Context, root, rie, tmp string, env []string, event []byte, rounds int, p *progress) (*coldStartInfo, error) {
	builds := []*coldBuild{
		{Name: "minimal aws-lambda-go function", pkg: "./minimal", dir: filepath.Join(root, "bench")},
		{Name: "authorizer (default, X-Ray)", pkg: "./functions/authorizer", dir: root},
		{Name: "authorizer (TRACER=none)", Tags: "noxray", pkg: "./functions/authorizer", dir: root},
		{Name: "authorizer (TRACER=otel)", Tags: "otel", pkg: "./functions/authorizer", dir: root},
	}
	sinkEnv, stopSinks, err := startTraceSinks()
	if err != nil {
		return nil, err
	}
	defer stopSinks()
	env = append(slices.Clone(env), sinkEnv...)
	for i, b := range builds {
		p.set("lambda: building " + b.Name)
		arm := filepath.Join(tmp, fmt.Sprintf("cold-arm64-%d", i))
		if err := buildBootstrap(ctx, b.dir, b.pkg, arm, "linux", "arm64", b.Tags); err != nil {
			return nil, err
		}
		st, err := os.Stat(arm)
		if err != nil {
			return nil, err
		}
		b.Arm64Bytes = st.Size()
		dir := filepath.Join(tmp, fmt.Sprintf("cold-host-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		b.hostPath = filepath.Join(dir, "bootstrap")
		if err := buildBootstrap(ctx, b.dir, b.pkg, b.hostPath, runtime.GOOS, runtime.GOARCH, b.Tags); err != nil {
			return nil, err
		}
	}

	const initRuns = 9
	// runs holds each build's init traces, run by run.
	runs := make([][]map[string]float64, len(builds))
	for i, b := range builds {
		p.set("lambda: init traces of " + b.Name)
		for range initRuns {
			total, pkgs, err := initTrace(ctx, b.hostPath)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.Name, err)
			}
			b.InitMs = append(b.InitMs, total)
			runs[i] = append(runs[i], pkgs)
		}
		b.InitTop = topPackages(runs[i], nil, 5)
	}
	// The default build is builds[1], TRACER=none's builds[2].
	xray := &xrayInitCost{Top: topPackages(runs[1], runs[2], 5)}
	without := packageSet(runs[2])
	for name := range packageSet(runs[1]) {
		if !without[name] {
			xray.Packages++
		}
	}
	for _, pkgs := range runs[1] {
		sum := 0.0
		for name, ms := range pkgs {
			if !without[name] {
				sum += ms
			}
		}
		xray.Ms = append(xray.Ms, sum)
	}
	var sdkInit []float64
	for _, pkgs := range runs[2] {
		sum := 0.0
		for name, ms := range pkgs {
			if strings.HasPrefix(name, "github.com/aws/aws-sdk-go-v2") || strings.HasPrefix(name, "github.com/aws/smithy-go") {
				sum += ms
			}
		}
		sdkInit = append(sdkInit, sum)
	}

	for r := range rounds {
		first := make([]float64, len(builds))
		for k := range builds {
			i := (r + k) % len(builds)
			b := builds[i]
			p.set(fmt.Sprintf("lambda: first answers, round %d/%d: %s", r+1, rounds, b.Name))
			inst, err := startRIE(rie, b.hostPath, env)
			if err != nil {
				return nil, err
			}
			t0 := time.Now()
			body, err := inst.invoke(ctx, event)
			elapsed := time.Since(t0)
			if err != nil {
				inst.stop()
				return nil, fmt.Errorf("%s: first invocation: %w", b.Name, err)
			}
			first[i] = float64(elapsed.Microseconds()) / 1e3
			b.Answer = strings.TrimSpace(string(body))
			if i > 0 {
				us, err := tracedDecisions(ctx, inst, event, r)
				if err != nil {
					inst.stop()
					return nil, fmt.Errorf("%s: %w", b.Name, err)
				}
				b.DecisionUs = append(b.DecisionUs, us)
			}
			inst.stop()
		}
		for i, b := range builds {
			b.FirstAnswerMs = append(b.FirstAnswerMs, first[i])
			b.AfterMinimalMs = append(b.AfterMinimalMs, first[i]-first[0])
		}
	}
	return &coldStartInfo{Rounds: rounds, Builds: builds, XRayInit: xray, NoneAWSSDKInitMs: sdkInit}, nil
}

// packageSet is every package initialised in any of runs.
func packageSet(runs []map[string]float64) map[string]bool {
	set := map[string]bool{}
	for _, pkgs := range runs {
		for name := range pkgs {
			set[name] = true
		}
	}
	return set
}

// topPackages are the n packages of runs whose initialisation costs the
// most, by their median over the runs (0 in a run without it), leaving out
// the packages initialised in any of except.
func topPackages(runs, except []map[string]float64, n int) []pkgInit {
	skip := packageSet(except)
	var top []pkgInit
	for name := range packageSet(runs) {
		if skip[name] {
			continue
		}
		ms := make([]float64, 0, len(runs))
		for _, pkgs := range runs {
			ms = append(ms, pkgs[name]) // 0 when absent
		}
		top = append(top, pkgInit{Package: name, Ms: median(ms)})
	}
	slices.SortFunc(top, func(x, y pkgInit) int {
		if x.Ms != y.Ms {
			if x.Ms > y.Ms {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Package, y.Package)
	})
	return top[:min(len(top), n)]
}

// initTrace runs bootstrap once with GODEBUG=inittrace=1 and no Lambda
// runtime API (it exits as soon as main asks for one) and returns the
// clock time of every package's initialisation, and their sum, in ms.
func initTrace(ctx context.Context, bootstrap string) (float64, map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GODEBUG=inittrace=1", "LOG_LEVEL=error"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // it fails without the runtime API; the traces are out by then
	total, pkgs := parseInitTrace(stderr.Bytes())
	if len(pkgs) == 0 {
		return 0, nil, fmt.Errorf("no init trace from %s: %.300s", bootstrap, stderr.String())
	}
	return total, pkgs, nil
}

// parseInitTrace reads the lines of GODEBUG=inittrace=1,
//
//	init github.com/x/y @1.2 ms, 0.34 ms clock, 5000 bytes, 10 allocs
//
// and returns each package's clock time and their sum, in ms.
func parseInitTrace(out []byte) (float64, map[string]float64) {
	pkgs := map[string]float64{}
	total := 0.0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// init, package, @start, ms,, clock, ms, clock,, ...
		if len(f) < 7 || f[0] != "init" || f[6] != "clock," {
			continue
		}
		ms, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			continue
		}
		pkgs[f[1]] += ms
		total += ms
	}
	return total, pkgs
}

// coldStartSection renders the comparison for docs/benchmarks.md.
func coldStartSection(l lambdaInfo) string {
	c := l.ColdStart
	if c == nil || len(c.Builds) == 0 {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n### Cold start against a minimal aws-lambda-go function\n\n")
	w("Four bootstraps, built as `make build` builds them (`-tags lambda.norpc -trimpath -ldflags \"-s -w\"`): `bench/minimal`, an aws-lambda-go authorizer that allows everyone and reads nothing; the authorizer as deployed by default, with the X-Ray SDK; the authorizer built with `make build TRACER=none` (build tag `noxray`: no tracer linked, no subsegments sent); and the authorizer built with `make build TRACER=otel` (build tag `otel`: OpenTelemetry over OTLP/HTTP). ")
	w("Package initialisation is `GODEBUG=inittrace=1 ./bootstrap` on this machine, the clock times of every package summed, median of %d runs. ", len(c.Builds[0].InitMs))
	w("The first answer is the time from sending a fresh emulator its first invocation to the answer (process start, initialisation, main's cold start with the authorizer's configuration and Redis client, one decision on Redis), %d rounds, the four in a rotating order within each round; \"after minimal\" is the median of each round's difference with the minimal function's.\n\n", c.Rounds)
	w("A traced decision is the median of %d warm invocations of the same instance after its first answer, each with a sampled trace header (`Sampled=1`), so that the X-Ray build sends one subsegment per Redis call over UDP to a local listener standing in for the daemon and the OpenTelemetry build two spans over OTLP/HTTP to a local receiver standing in for the collector, flushed before each answer; median of the rounds' medians.\n\n", warmRounds)
	w("| bootstrap | size, linux/arm64 | package init | costliest packages at init | first answer | after minimal | traced decision |\n|---|---|---|---|---|---|---|\n")
	for i, x := range c.Builds {
		var top []string
		for _, t := range x.InitTop[:min(len(x.InitTop), 3)] {
			top = append(top, fmt.Sprintf("%s %.2f ms", shortPkg(t.Package), t.Ms))
		}
		after := "-"
		if i > 0 {
			after = fmt.Sprintf("%.1f ms", median(x.AfterMinimalMs))
		}
		decision := "-"
		if len(x.DecisionUs) > 0 {
			decision = fmt.Sprintf("%.0f µs", median(x.DecisionUs))
		}
		w("| %s | %.1f MB | %.1f ms | %s | %.1f ms | %s | %s |\n", x.Name, float64(x.Arm64Bytes)/1e6, median(x.InitMs),
			strings.Join(top, ", "), median(x.FirstAnswerMs), after, decision)
	}
	if api, none := l.BootstrapBytes["api"], l.BootstrapBytes["api-noxray"]; api > 0 && none > 0 {
		w("\nThe api function, linux/arm64: %.1f MB by default, %.1f MB with `TRACER=none`", float64(api)/1e6, float64(none)/1e6)
		if otel := l.BootstrapBytes["api-otel"]; otel > 0 {
			w(", %.1f MB with `TRACER=otel`", float64(otel)/1e6)
		}
		w(".\n")
	}
	w("\nFirst answers per round, in ms:\n\n")
	for _, x := range c.Builds {
		w("- %s: %s\n", x.Name, joinFloats1(x.FirstAnswerMs))
	}
	if x := c.XRayInit; x != nil && len(x.Ms) > 0 {
		var top []string
		for _, t := range x.Top[:min(len(x.Top), 3)] {
			top = append(top, fmt.Sprintf("%s %.2f ms", shortPkg(t.Package), t.Ms))
		}
		w("\nThe X-Ray SDK's own package initialisation: the %d packages the default build initialises and the `TRACER=none` build does not (the SDK and what it imports: aws-sdk-go v1, gRPC, protobuf), their clock times summed, cost %.1f ms (median of %d runs; costliest %s).",
			x.Packages, median(x.Ms), len(x.Ms), strings.Join(top, ", "))
		if def, none := c.build("", false), c.build("noxray", false); def != nil && none != nil {
			w(" The default build's package initialisation is %.1f ms, `TRACER=none`'s %.1f ms: %.1f ms more.", median(def.InitMs), median(none.InitMs), median(def.InitMs)-median(none.InitMs))
		}
		w("\n")
	}
	for _, t := range coldStartTargets(c) {
		if t.NoMark {
			w("\nNo pass mark, %s: %s.\n", t.Name, t.Measured)
			continue
		}
		state := "met"
		if !t.Met {
			state = "**missed**"
		}
		w("\nTarget, %s: %s; measured %s: %s.\n", t.Name, t.Want, t.Measured, state)
	}
	w("\n")
	return b.String()
}

// coldStartTargets are the cold-start target, for the TRACER=none
// build, and the default build's row, which has no pass mark: its cost is
// reported as it is, with the X-Ray SDK's own package initialisation.
func coldStartTargets(c *coldStartInfo) []target {
	minimal := c.build("", true)
	if minimal == nil {
		return nil
	}
	var out []target
	if none := c.build("noxray", false); none != nil {
		after := median(none.AfterMinimalMs)
		t := target{
			Name:     coldStartTargetName,
			Want:     fmt.Sprintf("the authorizer built with `TRACER=none` at most %d ms after a minimal aws-lambda-go function, in one run", coldStartTargetMs),
			Measured: fmt.Sprintf("%.1f ms after (median of %d rounds' differences; first answers %.1f ms vs %.1f ms)", after, len(none.AfterMinimalMs), median(none.FirstAnswerMs), median(minimal.FirstAnswerMs)),
			Met:      after <= coldStartTargetMs,
		}
		if !t.Met {
			t.Why = fmt.Sprintf("%.1f ms over the bound", after-coldStartTargetMs)
		}
		out = append(out, t)
	}
	if def := c.build("", false); def != nil {
		measured := fmt.Sprintf("%.1f ms after (median of %d rounds' differences; first answers %.1f ms vs %.1f ms); package init %.1f ms",
			median(def.AfterMinimalMs), len(def.AfterMinimalMs), median(def.FirstAnswerMs), median(minimal.FirstAnswerMs), median(def.InitMs))
		if x := c.XRayInit; x != nil && len(x.Ms) > 0 {
			measured += fmt.Sprintf(", of which the X-Ray SDK's own packages %.1f ms (%d packages)", median(x.Ms), x.Packages)
		}
		out = append(out, target{
			Name:     "cold start, default build (X-Ray SDK)",
			Want:     "no pass mark: the X-Ray SDK stays the default tracer and its cost is reported as it is",
			Measured: measured,
			Met:      true,
			NoMark:   true,
		})
	}
	return out
}

// allTargets are the run's targets and the Lambda figures' (checked when
// the report is rendered, so that `-only lambda` and `-render` check them
// too), for the report's list of missed targets.
func allTargets(res *results) []target {
	return append(slices.Clone(res.Targets), coldStartTargets(res.Lambda.ColdStart)...)
}

// shortPkg shortens a package path for a table cell.
func shortPkg(p string) string {
	p = strings.TrimPrefix(p, "github.com/")
	return "`" + p + "`"
}

func joinFloats1(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.1f", x))
	}
	return strings.Join(parts, ", ")
}

// runOnlyLambda measures the Lambda figures alone and puts them into the
// report of an earlier run (out/benchmarks/results.json), whose other
// figures it keeps: `go run . -only lambda`.
func runOnlyLambda(ctx context.Context, cfg config, out, serverBin string) error {
	return updateEarlierRun(out, serverBin, "lambda", func(p *progress, srv *redisServer, res *results) error {
		b := &bench{cfg: cfg, client: statsClient(srv.addr), progress: p}
		defer b.client.Close()
		res.Lambda = runLambda(ctx, b, cfg.root, srv.addr, p)
		return nil
	})
}

// warmRounds is how many warm invocations measure a traced decision.
const warmRounds = 40

// tracedDecisions invokes inst warmRounds times, each invocation with a
// fresh sampled trace header, and returns the median time of one, in µs.
func tracedDecisions(ctx context.Context, inst *rieInstance, event []byte, round int) (float64, error) {
	times := make([]float64, 0, warmRounds)
	for j := range warmRounds {
		header := fmt.Sprintf("Root=1-%08x-%024x;Parent=%016x;Sampled=1", time.Now().Unix(), uint64(round)<<32|uint64(j)+1, uint64(j)+1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost,
			"http://"+inst.addr+"/2015-03-31/functions/function/invocations", bytes.NewReader(event))
		if err != nil {
			return 0, err
		}
		// The emulator passes it to the function as Lambda does
		// (Lambda-Runtime-Trace-Id).
		req.Header.Set("X-Amzn-Trace-Id", header)
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, fmt.Errorf("traced invocation: %w", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		elapsed := time.Since(t0)
		if err != nil || resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"errorType"`)) {
			return 0, fmt.Errorf("traced invocation: HTTP %d, %v: %.300s", resp.StatusCode, err, body)
		}
		times = append(times, float64(elapsed.Nanoseconds())/1e3)
	}
	return median(times), nil
}

// startTraceSinks starts what stands in for Lambda's X-Ray daemon (a UDP
// listener that reads and drops every datagram) and for the collector of
// the ADOT layer (an OTLP/HTTP receiver that reads each request whole and
// answers an empty ExportTraceServiceResponse, which is an empty protobuf
// body), on loopback, and returns the variables that point the builds at
// them.
func startTraceSinks() ([]string, func(), error) {
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("x-ray daemon stand-in: %w", err)
	}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		udp.Close()
		return nil, nil, fmt.Errorf("otlp receiver stand-in: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	env := []string{
		"AWS_XRAY_DAEMON_ADDRESS=" + udp.LocalAddr().String(),
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://" + ln.Addr().String() + "/v1/traces",
	}
	return env, func() { udp.Close(); _ = srv.Close() }, nil
}
