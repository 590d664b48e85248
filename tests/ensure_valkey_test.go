package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnsureValkey runs scripts/ensure-valkey.sh on a scratch system
// (ENSURE_VALKEY_ROOT) with stub apt-get, apt-cache and systemctl that
// record their calls: the fresh-machine paths of the Valkey half of make
// test, without installing anything on this machine.
func TestEnsureValkey(t *testing.T) {
	script, err := filepath.Abs("../scripts/ensure-valkey.sh")
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	cases := []struct {
		name string
		// installed puts stub valkey-server and valkey-cli on PATH.
		installed bool
		// sources is /etc/apt/sources.list; debian822 the deb822 file.
		sources, debian822 string
		root               bool // needs to run as root
		code               int
		// calls must appear in the stub calls' log, in order; never must not.
		calls, never []string
		// backportsAdded: the script wrote its bookworm-backports.list.
		backportsAdded bool
	}{
		{
			name: "already installed", installed: true, code: 0,
			never: []string{"apt-get", "systemctl"},
		},
		{
			name: "bookworm, backports line commented out", root: true, code: 0,
			sources:        "deb http://deb.debian.org/debian bookworm main\n# deb http://deb.debian.org/debian bookworm-backports main\n",
			backportsAdded: true,
			calls: []string{
				"apt-get update",
				"apt-get install -y --no-install-recommends -t bookworm-backports valkey-server",
				"systemctl disable valkey-server.service",
				"systemctl stop valkey-server.service",
			},
		},
		{
			name: "bookworm, backports in a deb822 file", root: true, code: 0,
			debian822: "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates bookworm-backports\nComponents: main\n",
			calls: []string{
				"apt-get install -y --no-install-recommends -t bookworm-backports valkey-server",
				"systemctl disable valkey-server.service",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("the install path runs as root only")
			}
			root := t.TempDir()
			stubs := filepath.Join(root, "stubs")
			installed := filepath.Join(root, "installed")
			calls := filepath.Join(root, "calls")
			for _, dir := range []string{stubs, installed, "etc/apt/sources.list.d", "usr/sbin"} {
				if !filepath.IsAbs(dir) {
					dir = filepath.Join(root, dir)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write := func(path, body string, mode os.FileMode) {
				t.Helper()
				if err := os.WriteFile(path, []byte(body), mode); err != nil {
					t.Fatal(err)
				}
			}
			write(filepath.Join(root, "etc/os-release"), "ID=debian\nVERSION_CODENAME=bookworm\n", 0o644)
			write(filepath.Join(root, "etc/apt/sources.list"), c.sources, 0o644)
			if c.debian822 != "" {
				write(filepath.Join(root, "etc/apt/sources.list.d/debian.sources"), c.debian822, 0o644)
			}
			valkey := "#!" + bash + "\necho 'Valkey server v=8.0.2'\n"
			if c.installed {
				write(filepath.Join(installed, "valkey-server"), valkey, 0o755)
				write(filepath.Join(installed, "valkey-cli"), valkey, 0o755)
			}
			// The stubs log "name args" and use shell builtins only; apt-get
			// install "installs" valkey.
			logCall := "#!" + bash + "\necho \"${0##*/} $*\" >>" + calls + "\n"
			write(filepath.Join(stubs, "apt-get"), logCall+
				"if [[ $1 == install ]]; then printf '%s' \"$VALKEY_STUB\" >"+installed+"/valkey-server; printf '%s' \"$VALKEY_STUB\" >"+installed+"/valkey-cli; chmod +x "+installed+"/valkey-*; fi\n", 0o755)
			write(filepath.Join(stubs, "apt-cache"), logCall, 0o755)
			write(filepath.Join(stubs, "systemctl"), logCall, 0o755)
			// The few real tools the script and the stubs run.
			for _, tool := range []string{"bash", "grep", "chmod", "rm"} {
				p, err := exec.LookPath(tool)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(p, filepath.Join(stubs, tool)); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bash, script)
			cmd.Env = []string{
				"PATH=" + stubs + ":" + installed,
				"ENSURE_VALKEY_ROOT=" + root,
				"VALKEY_STUB=" + valkey,
			}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Fatalf("exit %d, want %d:\n%s", code, c.code, out)
			}
			if !strings.Contains(string(out), "Valkey server v=8.0.2") {
				t.Errorf("no version line:\n%s", out)
			}
			logged, _ := os.ReadFile(calls)
			rest := string(logged)
			for _, call := range c.calls {
				i := strings.Index(rest, call+"\n")
				if i < 0 {
					t.Errorf("no call %q (in order) among:\n%s", call, logged)
					break
				}
				rest = rest[i+len(call):]
			}
			for _, call := range c.never {
				if strings.Contains(string(logged), call) {
					t.Errorf("called %s:\n%s", call, logged)
				}
			}
			_, err = os.Stat(filepath.Join(root, "etc/apt/sources.list.d/bookworm-backports.list"))
			if added := err == nil; added != c.backportsAdded {
				t.Errorf("bookworm-backports.list added: %v, want %v", added, c.backportsAdded)
			}
			if _, err := os.Stat(filepath.Join(root, "usr/sbin/policy-rc.d")); err == nil {
				t.Errorf("the script's policy-rc.d was left behind")
			}
		})
	}
}
