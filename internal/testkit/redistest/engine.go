package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The environment variables that choose the server the harness starts. Both
// take a command name (looked up on PATH) or a path.
const (
	// ServerEnv names the server binary: redis-server when unset, or
	// valkey-server, or any build of either.
	ServerEnv = "REDIS_SERVER"
	// CLIEnv names the matching command-line client. When unset it is the
	// server's name with "-server" replaced by "-cli", in the server's
	// directory when ServerEnv is a path: valkey-server gives valkey-cli.
	CLIEnv = "REDIS_CLI"

	defaultServer = "redis-server"
)

// Binaries returns the server binary and its client as named by ServerEnv
// and CLIEnv (or their defaults), before any PATH lookup.
func Binaries() (server, cli string) {
	server = os.Getenv(ServerEnv)
	if server == "" {
		server = defaultServer
	}
	cli = os.Getenv(CLIEnv)
	if cli == "" {
		dir, base := filepath.Split(server)
		cli = dir + strings.TrimSuffix(base, "-server") + "-cli"
	}
	return server, cli
}

// serverBinary returns the path of the server binary the harness starts.
func serverBinary() (string, error) {
	server, _ := Binaries()
	path, err := exec.LookPath(server)
	if err != nil {
		return "", fmt.Errorf("find %s (from %s): %w", server, ServerEnv, err)
	}
	return path, nil
}

// Engine is the server the harness starts, as its binary reports itself.
type Engine struct {
	// Name is the product, lower case: "redis" or "valkey".
	Name string
	// Version is the server's own version, "7.0.15" or "8.0.1". (Valkey
	// also reports a redis_version, for old clients: 7.2.4 on Valkey 8.)
	Version string
	// Server is the path of the server binary.
	Server string
	// CLI is the path of its command-line client, empty when none is found
	// (the harness itself does not need one).
	CLI string
}

// String describes the engine on one line, e.g.
// "Valkey 8.0.1 (/usr/bin/valkey-server, /usr/bin/valkey-cli)".
func (e Engine) String() string {
	cli := e.CLI
	if cli == "" {
		cli = "no cli"
	}
	name := e.Name
	if name != "" {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	return fmt.Sprintf("%s %s (%s, %s)", name, e.Version, e.Server, cli)
}

// FindEngine locates the server binary and its client and runs
// "SERVER --version" to learn which engine and version they are.
func FindEngine(ctx context.Context) (Engine, error) {
	server, err := serverBinary()
	if err != nil {
		return Engine{}, err
	}
	out, err := exec.CommandContext(ctx, server, "--version").Output()
	if err != nil {
		return Engine{}, fmt.Errorf("run %s --version: %w", server, err)
	}
	e, err := parseVersionLine(string(out))
	if err != nil {
		return Engine{}, fmt.Errorf("%s --version: %w", server, err)
	}
	e.Server = server
	_, cli := Binaries()
	if path, err := exec.LookPath(cli); err == nil {
		e.CLI = path
	}
	return e, nil
}

// parseVersionLine reads the name and version from a server's --version
// output: "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 ..."
// or "Valkey server v=8.0.1 sha=...".
func parseVersionLine(line string) (Engine, error) {
	fields := strings.Fields(line)
	if len(fields) < 3 || fields[1] != "server" {
		return Engine{}, fmt.Errorf("unrecognised version line %q", firstLine(line))
	}
	version, ok := strings.CutPrefix(fields[2], "v=")
	if !ok || version == "" {
		return Engine{}, fmt.Errorf("no v=VERSION in version line %q", firstLine(line))
	}
	return Engine{Name: strings.ToLower(fields[0]), Version: version}, nil
}

// engineFromInfo reads the engine name and version from the reply to
// INFO server. Valkey reports server_name:valkey and valkey_version next to
// a redis_version kept for old clients; Redis reports only redis_version.
func engineFromInfo(info string) (Engine, error) {
	name, ok := infoField(info, "server_name")
	if !ok || name == "" {
		name = "redis"
	}
	version, ok := infoField(info, name+"_version")
	if !ok || version == "" {
		return Engine{}, errors.New("INFO server has no " + name + "_version")
	}
	return Engine{Name: name, Version: version}, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
