package tests

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// Modules only the X-Ray build may link: the X-Ray SDK and what it pulls in
// (aws-sdk-go v1, whose endpoint tables are the costliest package
// initialisation of the default build, and gRPC).
var xrayOnlyModules = []string{
	"github.com/aws/aws-xray-sdk-go",
	"github.com/aws/aws-sdk-go",
	"google.golang.org/grpc",
}

// TestMakeBuildTracer: `make build-<Function> TRACER=…` builds both
// functions with the tracer asked for: the default links the X-Ray SDK,
// TRACER=none and TRACER=otel link neither it nor aws-sdk-go v1 (otel
// links gRPC's packages: the official OTLP protobufs' service stubs and the
// exporter's options import them), and any other value is refused. Built for this machine, into a folder of the test's own.
func TestMakeBuildTracer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both functions twice")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	// Links only: no server, no port, no environment of its own.
	t.Parallel()
	cases := []struct {
		tracer    string // "" for the default
		wantTags  string
		wantXRay  bool
		wantError string
	}{
		{"", "lambda.norpc", true, ""},
		{"none", "lambda.norpc,noxray", false, ""},
		{"xray", "lambda.norpc", true, ""},
		{"otel", "lambda.norpc,otel", false, ""},
		{"zipkin", "", false, "TRACER=zipkin: want xray, none or otel"},
	}
	for _, tc := range cases {
		t.Run("TRACER="+tc.tracer, func(t *testing.T) {
			for _, fn := range []string{"AuthorizerFunction", "ApiFunction"} {
				dir := t.TempDir()
				args := []string{"-s", "-C", "..", "build-" + fn, "ARTIFACTS_DIR=" + dir,
					"GOOS=" + runtime.GOOS, "GOARCH=" + runtime.GOARCH}
				if tc.tracer != "" {
					args = append(args, "TRACER="+tc.tracer)
				}
				out, err := exec.Command("make", args...).CombinedOutput()
				if tc.wantError != "" {
					if err == nil || !strings.Contains(string(out), tc.wantError) {
						t.Fatalf("make %s: %v, want a failure saying %q:\n%s", strings.Join(args, " "), err, tc.wantError, out)
					}
					continue
				}
				if err != nil {
					t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				info, err := exec.Command("go", "version", "-m", filepath.Join(dir, "bootstrap")).CombinedOutput()
				if err != nil {
					t.Fatalf("go version -m: %v\n%s", err, info)
				}
				if !strings.Contains(string(info), "-tags="+tc.wantTags+"\n") {
					t.Errorf("%s: built without -tags=%s:\n%s", fn, tc.wantTags, info)
				}
				for _, mod := range xrayOnlyModules {
					linked := strings.Contains(string(info), "\tdep\t"+mod+"\t")
					if tc.wantXRay && mod == xrayOnlyModules[0] && !linked {
						t.Errorf("%s: the default build does not link %s", fn, mod)
					}
					if !tc.wantXRay && linked && !(tc.tracer == "otel" && mod == "google.golang.org/grpc") {
						t.Errorf("%s: TRACER=none links %s", fn, mod)
					}
				}
			}
		})
	}
}

// TestNoXRayAuthorizerUnderEmulator: the authorizer built without a tracer
// (TRACER=none) decides as the default build does, under the emulator:
// counted on Redis, each tier's limit, a Deny past it; a trace header from
// API Gateway changes nothing.
func TestNoXRayAuthorizerUnderEmulator(t *testing.T) {
	srv := redistest.StartServer(t)
	secret := testkit.RandomSecret(t)
	rie := lambdatest.StartRIE(t, lambdatest.BuildBootstrapTags(t, "./functions/authorizer", "noxray"), azEnv(srv.URL(), secret, nil))
	trace := map[string]string{"X-Amzn-Trace-Id": "Root=1-67891233-abcdef012345678912345678;Sampled=1"}
	cases := []struct {
		name     string
		req      azRequest
		limit    int
		wantTier string
	}{
		{"anonymous", azRequest{ip: "198.51.100.30", headers: trace}, 3, "anonymous"},
		{"API key", azRequest{ip: "198.51.100.31", headers: map[string]string{"X-API-Key": azKey}}, 5, "org"},
		{"JWT", azRequest{ip: "198.51.100.32", headers: map[string]string{"Authorization": "Bearer " + azToken(t, secret, "user-nox")}}, 4, "user"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := 1; i <= tc.limit+1; i++ {
				a := azInvoke(t, rie, azRESTEvent(t, tc.req))
				if i <= tc.limit && !a.allowed() {
					t.Fatalf("request %d: %+v, want Allow", i, a)
				}
				if i > tc.limit && !a.denied() {
					t.Fatalf("request %d: %+v, want Deny", i, a)
				}
				if a.resp.Context["tier"] != tc.wantTier || a.resp.Context["degraded"] == true {
					t.Fatalf("request %d: context %v, want tier %s, not degraded", i, a.resp.Context, tc.wantTier)
				}
			}
		})
	}
}
