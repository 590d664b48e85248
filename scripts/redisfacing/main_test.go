package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeModule writes files (slash-separated paths relative to the root) into
// a new module example.com/m and returns its root.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.24\n"
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// harness is a stand-in internal/testkit/redistest: Start reaches
// serverBinary, the entry point, and Pool does not.
const harness = `package redistest

func serverBinary() string { return "redis-server" }

func Start() { _ = serverBinary() }

type CA struct{}

func (CA) Pool() {}
`

func TestFindSelectsTestsThatReachTheHarness(t *testing.T) {
	root := writeModule(t, map[string]string{
		"internal/testkit/redistest/redistest.go": harness,
		"internal/testkit/redistest/redistest_test.go": `package redistest

import "testing"

func TestStartDirect(t *testing.T) { Start() }
func TestEntryPointItself(t *testing.T) { _ = serverBinary() }
func TestPureParsing(t *testing.T) {}
func TestMain(m *testing.M) { Start() }
`,
		"a/a_test.go": `package a_test

import (
	"testing"

	rt "example.com/m/internal/testkit/redistest"
)

type fixture struct{}

func (fixture) up() { rt.Start() }

var startLater = func() { rt.Start() }

func helper() { startLater() }

func TestThroughRenamedImport(t *testing.T) { rt.Start() }
func TestThroughHelperChain(t *testing.T) { helper() }
func TestThroughMethod(t *testing.T) { var f fixture; f.up() }
func TestInSubtest(t *testing.T) { t.Run("x", func(t *testing.T) { rt.Start() }) }
func FuzzThroughHelper(f *testing.F) { helper() }
func TestOnlyTheCA(t *testing.T) { rt.CA{}.Pool() }
func Testlowercase(t *testing.T) { rt.Start() }
func BenchmarkStarts(b *testing.B) { rt.Start() }
`,
		"b/b_test.go": `package b

import "testing"

func TestNothingToDoWithRedis(t *testing.T) {}
`,
		"a/testdata/c_test.go": `package c

import (
	"testing"

	"example.com/m/internal/testkit/redistest"
)

func TestInTestdata(t *testing.T) { redistest.Start() }
`,
	})
	got, err := find(root)
	if err != nil {
		t.Fatal(err)
	}
	wantTests := []string{"FuzzThroughHelper", "TestEntryPointItself", "TestInSubtest", "TestStartDirect",
		"TestThroughHelperChain", "TestThroughMethod", "TestThroughRenamedImport"}
	if !slices.Equal(got.tests, wantTests) {
		t.Errorf("tests = %q\nwant    %q", got.tests, wantTests)
	}
	wantPackages := []string{"./a", "./internal/testkit/redistest"}
	if !slices.Equal(got.packages, wantPackages) {
		t.Errorf("packages = %q, want %q", got.packages, wantPackages)
	}
	if want := "^(FuzzThroughHelper|TestEntryPointItself|TestInSubtest|TestStartDirect|TestThroughHelperChain|TestThroughMethod|TestThroughRenamedImport)$"; got.runPattern() != want {
		t.Errorf("runPattern() = %q, want %q", got.runPattern(), want)
	}
}

func TestFindErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"unparsable Go", map[string]string{"x/x.go": "package x\nfunc {"}},
		{"no module line", map[string]string{"go.mod": "go 1.24\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if body, ok := tt.files["go.mod"]; ok {
				if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				root = writeModule(t, tt.files)
			}
			if _, err := find(root); err == nil {
				t.Error("find succeeded, want an error")
			}
		})
	}
}

// TestFindOnThisModule pins the selection of this repository's tests at a few
// points on each side: the Redis-facing tests the Valkey half must run, and
// tests that never start a server.
func TestFindOnThisModule(t *testing.T) {
	got, err := find(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"TestSlidingBuckets",                               // pkg/ratelimit, single node and cluster
		"TestSimultaneousRequestsAdmitExactlyTheLimit",     // pkg/ratelimit
		"TestScriptCacheLossReachesNoCaller",               // scripts
		"TestClusterTopologyChangesUnderLoad",              // failover
		"TestRedisTLS",                                     // TLS
		"TestRedisIAMTokenRenewal",                         // IAM
		"TestTemplateIamUserAccessString",                  // the template's ACL
		"TestClusterCallIsOneSubsegmentEvenWhenRedirected", // internal/tracing
		"TestDecisionReplyReadsRealScriptReplies",          // pkg/ratelimit
		"TestClusterSpreadsKeysAndFailsOver",               // internal/testkit/redistest
		"TestStartedServerIsTheNamedEngine",                // internal/testkit/redistest
	} {
		if !slices.Contains(got.tests, name) {
			t.Errorf("%s not selected", name)
		}
	}
	for _, name := range []string{"TestParseRate", "TestPickPort", "TestSetHeaders", "TestBinaries", "TestFindOnThisModule"} {
		if slices.Contains(got.tests, name) {
			t.Errorf("%s selected but starts no server", name)
		}
	}
	for _, pkg := range []string{"./tests", "./pkg/ratelimit", "./internal/testkit/redistest", "./internal/tracing"} {
		if !slices.Contains(got.packages, pkg) {
			t.Errorf("package %s not selected", pkg)
		}
	}
}
