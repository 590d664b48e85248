// Command bench measures slidegate's rate-limiting algorithms against the
// Redis rate limiters Go teams would pick instead, on one redis-server it
// starts itself, and writes docs/benchmarks.md, charts and JSON.
//
// Run it with `make bench`, or from this directory with `go run .`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// config is the benchmark's shape; flags set it.
type config struct {
	rounds          int
	plansRounds     int // the several-limits section's rounds
	serverRounds    int // the server-side section's rounds
	serverRequests  int // redis-benchmark requests per case and round
	benchBin        string
	duration        time.Duration
	concurrency     []int
	identities      int // memory phase
	traceRequests   int
	traceIdentities int
	burst           int
	throughputLimit limitSpec
	memoryLimit     limitSpec
	floodLimit      limitSpec
	burstLimit      limitSpec
	attackLimit     limitSpec // virtual clock
	realAttackLimit limitSpec // real time
	attackDelta     float64
	root            string
	lambda          bool
}

// bench is the state shared by every phase.
type bench struct {
	cfg      config
	client   *redis.Client // contenders' client, with the round-trip hook
	stats    *redis.Client // INFO, CONFIG, FLUSHALL
	hook     *roundTrips
	ids      []string
	progress *progress
}

func main() {
	var (
		out      = flag.String("out", "../docs", "directory that receives benchmarks.md and benchmarks/")
		luaDir   = flag.String("lua", "../pkg/ratelimit/lua", "slidegate's Lua scripts")
		server   = flag.String("redis-server", "redis-server", "redis-server binary")
		rounds   = flag.Int("rounds", 3, "throughput rounds per contender and concurrency")
		plansRds = flag.Int("plans-rounds", 7, "rounds of each kind of decision in the several-limits section")
		srvRds   = flag.Int("server-rounds", 7, "rounds of the server-side section (redis-benchmark), at least 5 for publishing")
		srvReqs  = flag.Int("server-requests", 100_000, "redis-benchmark requests per case and round in the server-side section")
		benchBin = flag.String("redis-benchmark", "redis-benchmark", "redis-benchmark binary (Debian's redis-tools)")
		duration = flag.Duration("duration", 500*time.Millisecond, "length of one throughput round")
		conc     = flag.String("concurrency", "1,16,64", "client concurrencies")
		idents   = flag.Int("identities", 200_000, "identities in the memory phase")
		traceN   = flag.Int("trace", 1_000_000, "requests in the accuracy trace (about)")
		quick    = flag.Bool("quick", false, "a smoke run: small everything (figures not for publishing)")
		root     = flag.String("root", "..", "the slidegate checkout (functions/, events/, bin/aws-lambda-rie)")
		render   = flag.String("render", "", "re-render the report and charts from this results.json instead of measuring")
		lambda   = flag.Bool("lambda", true, "measure the Lambda figures (bootstrap size, cold start and warm overhead under the emulator, allocations)")
		only     = flag.String("only", "", `"lambda", "plans" or "server": measure the Lambda figures, the several-limits section or the server-side (redis-benchmark) section alone and put them into the earlier run's <out>/benchmarks/results.json and report`)
	)
	flag.Parse()
	cfg := config{
		rounds: *rounds, plansRounds: *plansRds, serverRounds: *srvRds, serverRequests: *srvReqs, benchBin: *benchBin, duration: *duration, identities: *idents,
		traceRequests: *traceN, traceIdentities: 1000, burst: 5000,
		throughputLimit: limitSpec{1000, time.Minute},
		memoryLimit:     limitSpec{100, time.Hour},
		floodLimit:      limitSpec{100, time.Minute},
		// The burst's window is an hour so that the burst is decided well
		// within one emission interval (36 s): the leaky bucket's key lives
		// one interval on Redis's clock while the virtual clock stands still
		// (at 100/1m, 0.6 s, and a 2 s burst saw it expire three times),
		// and the peers, on real time, refill nothing meanwhile.
		burstLimit:      limitSpec{100, time.Hour},
		attackLimit:     limitSpec{100, time.Minute},
		realAttackLimit: limitSpec{100, time.Second},
		attackDelta:     0.02,
	}
	if cfg.serverRounds < 1 || cfg.serverRequests < 1 {
		fmt.Fprintf(os.Stderr, "bench: -server-rounds %d, -server-requests %d: want at least 1\n", cfg.serverRounds, cfg.serverRequests)
		os.Exit(2)
	}
	if cfg.plansRounds < 1 {
		fmt.Fprintf(os.Stderr, "bench: -plans-rounds %d: want at least 1\n", cfg.plansRounds)
		os.Exit(2)
	}
	for _, f := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -concurrency %q: want positive integers separated by commas\n", *conc)
			os.Exit(2)
		}
		cfg.concurrency = append(cfg.concurrency, n)
	}
	if *quick {
		cfg.rounds, cfg.duration, cfg.identities, cfg.traceRequests = 1, 200*time.Millisecond, 5000, 50_000
		cfg.plansRounds, cfg.serverRounds, cfg.serverRequests = 1, 1, 5000
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg.root, cfg.lambda = *root, *lambda
	if *render != "" {
		if err := rerender(*render, *out); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	switch *only {
	case "":
	case "lambda":
		if err := runOnlyLambda(ctx, cfg, *out, *server); err != nil {
			fmt.Fprintf(os.Stderr, "\nbench: %v\n", err)
			os.Exit(1)
		}
		return
	case "plans":
		if err := runOnlyPlans(ctx, cfg, *out, *server); err != nil {
			fmt.Fprintf(os.Stderr, "\nbench: %v\n", err)
			os.Exit(1)
		}
		return
	case "server":
		if err := runOnlyServer(ctx, cfg, *out, *luaDir, *server, cfg.benchBin); err != nil {
			fmt.Fprintf(os.Stderr, "\nbench: %v\n", err)
			os.Exit(1)
		}
		return
	default:
		fmt.Fprintf(os.Stderr, "bench: -only %q: want lambda, plans or server\n", *only)
		os.Exit(2)
	}
	if err := run(ctx, cfg, *out, *luaDir, *server); err != nil {
		fmt.Fprintf(os.Stderr, "\nbench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, out, luaDir, serverBin string) error {
	started := time.Now()
	p := newProgress()
	defer p.done()
	p.set("starting redis-server")
	srv, err := startRedis(serverBin)
	if err != nil {
		return err
	}
	defer srv.stop()

	hook := newRoundTrips()
	client := redis.NewClient(&redis.Options{Addr: srv.addr, PoolSize: 256, MinIdleConns: 64, PoolTimeout: 30 * time.Second, ReadTimeout: 10 * time.Second})
	client.AddHook(hook)
	defer client.Close()
	stats := statsClient(srv.addr)
	defer stats.Close()
	b := &bench{cfg: cfg, client: client, stats: stats, hook: hook, progress: p}
	b.ids = benchIdentities()

	contenders, err := loadContenders(ctx, client, luaDir)
	if err != nil {
		return err
	}
	res, err := newResults(ctx, stats, cfg)
	if err != nil {
		return err
	}
	byName := map[string]*contenderResult{}
	for _, c := range contenders {
		cr := &contenderResult{Name: c.Name, Group: c.Group, Clock: c.Clock}
		res.Contenders = append(res.Contenders, cr)
		byName[c.Name] = cr
	}
	limiters := func() []*contender {
		var out []*contender
		for _, c := range contenders {
			if c.Group != "ceiling" {
				out = append(out, c)
			}
		}
		return out
	}()

	// Correctness under contention first: cheap, and a contender that fails
	// here is reported even if a later phase runs out of time.
	for i, c := range limiters {
		p.set(fmt.Sprintf("burst %d/%d: %s", i+1, len(limiters), c.Name))
		r, err := runBurst(ctx, b, c, cfg.burst)
		if err != nil {
			return err
		}
		byName[c.Name].Burst = &r
	}
	for i, c := range limiters {
		p.set(fmt.Sprintf("flood %d/%d: %s", i+1, len(limiters), c.Name))
		r, err := runFlood(ctx, b, c, "limiter")
		if err != nil {
			return err
		}
		byName[c.Name].Flood = append(byName[c.Name].Flood, r)
		if c.buildGate != nil {
			vias := []string{"gate"}
			if c.Name == nameDefault {
				// Without the cache the Gate is the Limiter plus the
				// failure policy: shown once, for the default algorithm.
				vias = []string{"gate-nocache", "gate"}
			}
			for _, via := range vias {
				r, err := runFlood(ctx, b, c, via)
				if err != nil {
					return err
				}
				byName[c.Name].Flood = append(byName[c.Name].Flood, r)
			}
		}
	}
	for i, c := range limiters {
		for _, a := range attacks(cfg.attackLimit.Count, cfg.attackDelta) {
			p.set(fmt.Sprintf("attacks %d/%d: %s, %s", i+1, len(limiters), c.Name, a.Name))
			r, err := runAttack(ctx, b, c, a)
			if err != nil {
				return err
			}
			byName[c.Name].Attacks = append(byName[c.Name].Attacks, r)
		}
	}
	for _, a := range attacks(cfg.attackLimit.Count, cfg.attackDelta) {
		res.Attacks = append(res.Attacks, attackInfo{Name: a.Name, About: a.About})
	}
	for i, c := range limiters {
		p.set(fmt.Sprintf("memory %d/%d: %s (%d identities)", i+1, len(limiters), c.Name, cfg.identities))
		r, err := runMemory(ctx, b, c, cfg.identities)
		if err != nil {
			return err
		}
		byName[c.Name].Memory = &r
	}

	p.set(fmt.Sprintf("accuracy: building a trace of about %d requests", cfg.traceRequests))
	tr := makeTrace(cfg.traceIdentities, cfg.traceRequests, limitSpec{100, time.Minute}, 2026)
	res.Trace = traceInfo{Requests: tr.Requests, Identities: tr.Identities, Duration: tr.Duration.Round(time.Second).String(),
		Limit: "100/1m", ExactAdmitted: tr.ExactAllow}
	for i, c := range limiters {
		if c.replay == nil {
			byName[c.Name].Accuracy = &accuracyResult{Note: "not replayable: " + c.Clock}
			continue
		}
		label := fmt.Sprintf("accuracy %d/%d: %s", i+1, len(limiters), c.Name)
		p.set(label)
		r, err := runAccuracy(ctx, b, c, tr, func(done int) {
			p.set(fmt.Sprintf("%s %d%%", label, done*100/tr.Requests))
		})
		if err != nil {
			return err
		}
		byName[c.Name].Accuracy = &r
	}

	// Throughput last: rounds interleave contenders, so that drift on a
	// shared machine spreads over all of them rather than one.
	runs := map[string]map[int][]throughputRun{}
	total := cfg.rounds * len(contenders) * len(cfg.concurrency)
	k := 0
	for round := 0; round < cfg.rounds; round++ {
		// Each round starts one contender later, so that no contender
		// always follows the same one (and meets the keys it leaves
		// expiring, or the rehashing it leaves behind).
		for j := range contenders {
			c := contenders[(round+j)%len(contenders)]
			for _, n := range cfg.concurrency {
				k++
				p.set(fmt.Sprintf("throughput %d/%d: round %d, %s, concurrency %d", k, total, round+1, c.Name, n))
				r, err := runThroughput(ctx, b, c, n, cfg.duration)
				if err != nil {
					return err
				}
				if runs[c.Name] == nil {
					runs[c.Name] = map[int][]throughputRun{}
				}
				runs[c.Name][n] = append(runs[c.Name][n], r)
			}
		}
	}
	for _, c := range contenders {
		for _, n := range cfg.concurrency {
			byName[c.Name].Throughput = append(byName[c.Name].Throughput, summarise(n, runs[c.Name][n]))
		}
	}

	res.ServerSide = runServerSide(ctx, b, contenders, cfg.benchBin, srv.addr, cfg.serverRequests, cfg.serverRounds)
	res.Plans, err = runPlans(ctx, b)
	if err != nil {
		return err
	}
	if err := runPlanMemory(ctx, b, res.Plans, cfg.identities); err != nil {
		return err
	}
	if cfg.lambda {
		res.Lambda = runLambda(ctx, b, cfg.root, srv.addr, p)
	} else {
		res.Lambda = lambdaInfo{Note: "skipped (-lambda=false)"}
	}
	res.Seconds = time.Since(started).Seconds()
	res.LoadAfter = loadAverage()
	res.Targets = checkTargets(res)
	p.set("writing the report")
	return writeOutputs(out, res)
}

// writeOutputs writes the JSON, the charts and the Markdown report.
// updateEarlierRun is `-only <part>`: it reads an earlier run's results
// (out/benchmarks/results.json), starts a redis-server, lets measure replace
// that part's figures, and writes the report again with every other figure
// as it was.
func updateEarlierRun(out, serverBin, part string, measure func(p *progress, srv *redisServer, res *results) error) error {
	path := filepath.Join(out, "benchmarks", "results.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-only %s updates an earlier run's results: %w", part, err)
	}
	var res results
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	p := newProgress()
	defer p.done()
	p.set("starting redis-server")
	srv, err := startRedis(serverBin)
	if err != nil {
		return err
	}
	defer srv.stop()
	again := remeasure{Part: part, Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), LoadBefore: loadAverage()}
	if err := measure(p, srv, &res); err != nil {
		return err
	}
	again.LoadAfter = loadAverage()
	res.Remeasured = append(res.Remeasured, again)
	p.set("writing the report")
	return writeOutputs(out, &res)
}

func writeOutputs(out string, res *results) error {
	dir := filepath.Join(out, "benchmarks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	files := map[string][]byte{
		filepath.Join(dir, "results.json"):  append(js, '\n'),
		filepath.Join(out, "benchmarks.md"): []byte(renderReport(res)),
	}
	for name, svg := range renderCharts(res) {
		files[filepath.Join(dir, name)] = []byte(svg)
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// benchIdentities is the pool of identities the throughput phases draw
// from.
func benchIdentities() []string {
	ids := make([]string, 0, 10_000)
	for i := 0; i < 10_000; i++ {
		ids = append(ids, fmt.Sprintf("user-%05d", i))
	}
	return ids
}

// progress is the one status line on stderr.
type progress struct {
	start time.Time
	tty   bool
}

func newProgress() *progress {
	fi, err := os.Stderr.Stat()
	return &progress{start: time.Now(), tty: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

func (p *progress) set(msg string) {
	el := time.Since(p.start).Round(time.Second)
	if p.tty {
		fmt.Fprintf(os.Stderr, "\r\033[K[%s] %s", el, msg)
		return
	}
	// Not a terminal (CI, make with output captured): one line per step,
	// skipping the per-percent updates.
	if strings.HasSuffix(msg, "%") {
		return
	}
	fmt.Fprintf(os.Stderr, "[%s] %s\n", el, msg)
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintf(os.Stderr, "\r\033[K[%s] done\n", time.Since(p.start).Round(time.Second))
	}
}

// machine describes where the benchmark ran.
func machine() (cpu string, nproc int) {
	nproc = runtime.NumCPU()
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH, nproc
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v), nproc
		}
	}
	return runtime.GOARCH, nproc
}

// rerender rebuilds the report and charts from a results.json, so that the
// report's wording can change without measuring again. Targets are checked
// again from the figures.
func rerender(path, out string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var res results
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	res.Targets = checkTargets(&res)
	return writeOutputs(out, &res)
}
