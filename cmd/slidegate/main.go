// Command slidegate is the operator's tool for a slidegate deployment. It
// reads the configuration as the functions do (the environment, and a
// stage of template.yaml with its samconfig.toml parameter overrides),
// hashes identities with the same key, and reads and resets the same Redis
// keys, through pkg/ratelimit.
//
// Usage:
//
//	slidegate inspect [flags] (--ip ADDR | --api-key KEY | --api-key-hash HEX | --sub SUBJECT | --identity HASH --tier TIER)
//	slidegate reset   [flags] [--yes] (--ip ADDR | ...)
//	slidegate block   [flags] [--yes] (CALLER | --network CIDR) --for 1h --reason TEXT
//	slidegate exempt  [flags] [--yes] (CALLER | --network CIDR) --for 1h --reason TEXT
//	slidegate scale   [flags] [--yes] CALLER x10 --for 1h --reason TEXT
//	slidegate lift    [flags] [--yes] (CALLER | --network CIDR)
//	slidegate controls [flags]
//	slidegate check   [flags]
//	slidegate verify  --url API_URL [--api auto|rest|http] [--api-key KEY]
//	slidegate version
//
// Install it from a clone with `make slidegate` (into ./bin, version
// stamped) or `go install ./cmd/slidegate`, and from a release tag with
//
//	go install github.com/slidegate/slidegate/cmd/slidegate@v0.1.0
//
// Exit status: 0 when all is well, 1 for errors (check found the
// configuration refused, Redis unreachable, reset not confirmed, verify
// found a check failing), 2 for a
// command line that does not parse.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/version"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// errUsage marks a command line that does not parse; its message has been
// printed with the usage.
var errUsage = errors.New("usage")

// env is what a command runs with, passed down from main.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	environ        func() []string
}

func main() {
	// go-redis logs failed dials on its own; the command says what failed
	// in one line instead.
	redis.SetLogger(observe.RedisLog{L: slog.New(slog.DiscardHandler)})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, environ: os.Environ})
	stop()
	os.Exit(code)
}

const usage = `slidegate: inspect, reset, control and check a slidegate deployment's rate limits

Usage:
  slidegate inspect [flags] CALLER   every limit of the caller: used, remaining, reset, retry-after
  slidegate reset   [flags] CALLER   clear the caller's counters (asks first; --yes does not)
  slidegate block   [flags] CALLER   deny the caller (or --network CIDR) --for DURATION --reason TEXT
  slidegate exempt  [flags] CALLER   admit the caller (or --network CIDR) without counting, --for, --reason
  slidegate scale   [flags] CALLER xN  multiply every limit of the caller by N (x10, x0.1), --for, --reason
  slidegate lift    [flags] CALLER   end the caller's (or --network's) control now
  slidegate controls [flags]         every control in force: kind, target, factor, set by, set at, ends, reason
  slidegate check   [flags]          every limit, route and setting of a stage, with errors and warnings
  slidegate verify  --url API_URL    prove a deployed API from outside: headers, 429, no fallback, unknown routes
  slidegate version                  the version of this build (the functions log theirs)

CALLER is one of --ip ADDR, --api-key KEY, --api-key-hash SHA256HEX, --sub JWT_SUBJECT,
or --identity HASH: the caller as the logs, Contributor Insights and the
dashboard print it (inspect and reset add --tier, as the log line says).
block, exempt, scale, lift and controls reach Redis directly, or with
--function NAME through the operator function (lambda:InvokeFunction, in
CloudTrail), from anywhere with AWS credentials.
Run 'slidegate COMMAND -h' for a command's flags.

The configuration is read as the functions read it: the environment
(REDIS_URL, REDIS_CLUSTER, REDIS_AUTH_SECRET_ARN, REDIS_IAM_USER,
RATE_LIMIT_HASH_KEY_SECRET_ARN, RATE_LIMIT_*, ...) over the stage's
template.yaml and samconfig.toml values.
`

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "inspect":
		err = runInspect(ctx, args[1:], e)
	case "reset":
		err = runReset(ctx, args[1:], e)
	case "block", "exempt", "scale", "lift", "controls":
		err = runControl(ctx, args[0], args[1:], e)
	case "check":
		var failed bool
		failed, err = runCheck(args[1:], e)
		if err == nil && failed {
			return exitError
		}
	case "verify":
		var failed bool
		failed, err = runVerify(ctx, args[1:], e)
		if err == nil && failed {
			return exitError
		}
	case "version", "-version", "--version":
		fmt.Fprintf(e.stdout, "slidegate %s\n", version.Version())
		return exitOK
	case "-h", "-help", "--help", "help":
		fmt.Fprint(e.stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "slidegate: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	default:
		fmt.Fprintf(e.stderr, "slidegate %s: %v\n", args[0], err)
		return exitError
	}
}
