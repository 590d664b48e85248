package tests

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestLocalAPIBuildsWithoutTracing (issue 41): make local builds the local
// API with the build tags its go run line gives, and with them nothing of
// the X-Ray SDK, gRPC or OpenTelemetry is compiled (or downloaded) for a
// run that traces nothing. Before: no tag, 566 packages, 64 of them gRPC's
// and 12 the X-Ray SDK's; after: 384, none.
func TestLocalAPIBuildsWithoutTracing(t *testing.T) {
	raw, err := os.ReadFile("../mk/local.mk")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\$\(GO\) run -tags (\S+) \./cmd/localapi`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatalf("mk/local.mk: no `$(GO) run -tags ... ./cmd/localapi` line")
	}
	out, err := exec.Command("go", "list", "-tags", m[1], "-deps", "../cmd/localapi").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, unwanted := range []string{"github.com/aws/aws-xray-sdk-go", "google.golang.org/grpc", "go.opentelemetry.io"} {
			if strings.HasPrefix(pkg, unwanted) {
				t.Errorf("make local (tags %s) builds %s", m[1], pkg)
			}
		}
	}
}
