package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// runIn runs the command in-process with exactly vars as its environment.
func runIn(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return vars[k] }, environ: func() []string { return nil }}
	code = run(context.Background(), args, e)
	return code, out.String(), errOut.String()
}

// TestCommandsSayWhatTheyDoNotRead (issue 41 item 4): outside a stage's
// files, inspect says it read the environment alone, naming the files it
// looked for, and its header names no stage; check names them and refuses.
//
// Before: inspect --api-key local-pro-key printed "on stage dev" over the
// environment's limits, and nothing on stderr; check said "read template:
// open template.yaml: no such file or directory".
func TestCommandsSayWhatTheyDoNotRead(t *testing.T) {
	srv := redistest.StartServer(t)
	dir := t.TempDir()
	template, samconfig := filepath.Join(dir, "template.yaml"), filepath.Join(dir, "samconfig.toml")
	files := []string{"--template", template, "--samconfig", samconfig}
	code, stdout, stderr := runIn(t, map[string]string{"REDIS_URL": srv.URL()}, append([]string{"inspect", "--api-key", "local-pro-key"}, files...)...)
	if code != exitOK {
		t.Fatalf("inspect: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "looked for "+template+" and "+samconfig+"; read the environment only, not stage dev's settings") {
		t.Errorf("inspect outside the stage's files does not say what it read:\n%s", stderr)
	}
	if first, _, _ := strings.Cut(stdout, "\n"); !strings.Contains(first, "(org) on the environment only (no stage files read)") || strings.Contains(first, "stage dev") {
		t.Errorf("inspect's header %q: want it to say the environment only, and name no stage", first)
	}
	code, stdout, stderr = runIn(t, nil, append([]string{"check", "--stage", "dev"}, files...)...)
	if code != exitError || !strings.Contains(stderr, "looked for "+template+" (and "+samconfig+")") {
		t.Errorf("check outside the stage's files: exit %d, want 1 and the files it looked for\n%s%s", code, stdout, stderr)
	}
	// A template without its samconfig.toml: the template's defaults.
	code, _, stderr = runIn(t, map[string]string{"REDIS_URL": srv.URL()}, "inspect", "--ip", "203.0.113.7", "--template", "../../template.yaml", "--samconfig", samconfig)
	if code != exitOK || !strings.Contains(stderr, "no samconfig.toml: looked for "+samconfig) {
		t.Errorf("inspect without samconfig.toml: exit %d, want a word on it\n%s", code, stderr)
	}
}

// TestCheckRefusesPlaceholders (issue 41 item 4): check reports as errors
// the samconfig.toml values CloudFormation refuses before anything is
// created: a REPLACE_ME placeholder, and a parameter without a default left
// without a value. Before: the shipped samconfig.toml checked "0 errors".
func TestCheckRefusesPlaceholders(t *testing.T) {
	samconfig := func(overrides string) string {
		path := filepath.Join(t.TempDir(), "samconfig.toml")
		body := "version = 0.1\n[dev.deploy.parameters]\nparameter_overrides = \"" + overrides + "\"\n"
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name, samconfig string
		code            int
		says, not       []string
	}{
		{"the shipped samconfig.toml", "../../samconfig.toml", exitError,
			[]string{`error: samconfig.toml [dev] VpcId="vpc-REPLACE_ME": a placeholder`, `error: samconfig.toml [dev] SubnetIds="subnet-REPLACE_ME_A,subnet-REPLACE_ME_B": a placeholder`}, nil},
		{"no value for a parameter without a default", samconfig("StageName=dev SubnetIds=subnet-0a1b2c3d4e5f60718,subnet-0a1b2c3d4e5f60719"), exitError,
			[]string{"error: samconfig.toml [dev]: no value for the template parameter VpcId, which has no default"}, []string{"SubnetIds, which"}},
		{"an empty value", samconfig("StageName=dev VpcId= SubnetIds=subnet-0a1b2c3d4e5f60718"), exitError,
			[]string{"no value for the template parameter VpcId"}, nil},
		{"every placeholder replaced", samconfig("StageName=dev VpcId=vpc-0a1b2c3d4e5f60718 SubnetIds=subnet-0a1b2c3d4e5f60718,subnet-0a1b2c3d4e5f60719"), exitOK,
			[]string{"0 errors"}, []string{"REPLACE_ME", "no value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIn(t, nil, "check", "--stage", "dev", "--template", "../../template.yaml", "--samconfig", tc.samconfig)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.says {
				if !strings.Contains(stdout, s) {
					t.Errorf("check does not say %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(stdout, s) {
					t.Errorf("check says %q:\n%s", s, stdout)
				}
			}
		})
	}
}

// TestResetSaysWhatWarmInstancesDo (issue 41 item 4): reset's last line
// says what the functions do (a warm instance holds a cached denial at
// most ratelimit.ControlPropagation, their Limiter reading live controls),
// not that it denies until the Retry-After it gave, which it did not.
func TestResetSaysWhatWarmInstancesDo(t *testing.T) {
	srv := redistest.StartServer(t)
	code, stdout, stderr := runIn(t, map[string]string{"REDIS_URL": srv.URL()}, "reset", "--yes", "--ip", "203.0.113.7", "--template", "../../template.yaml", "--samconfig", "../../samconfig.toml")
	if code != exitOK {
		t.Fatalf("reset: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "Warm function instances admit the caller again within 2s") || strings.Contains(stdout, "keeps denying") {
		t.Errorf("reset's message:\n%s", stdout)
	}
}
