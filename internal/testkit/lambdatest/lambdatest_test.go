package lambdatest_test

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
)

// TestConcurrentEmulators runs several emulators at once, each on its own
// ports, with the authorizer's bootstrap (no Redis configured: it answers
// by its failure policy), and tells a response from a function error.
func TestConcurrentEmulators(t *testing.T) {
	bootstrap := lambdatest.BuildBootstrap(t, "./functions/authorizer")
	if again := lambdatest.BuildBootstrap(t, "./functions/authorizer"); again != bootstrap {
		t.Errorf("second build at %s, want the cached %s", again, bootstrap)
	}
	anonymous, err := os.ReadFile("../../../events/authorizer-anonymous.json")
	if err != nil {
		t.Fatal(err)
	}
	malformed, err := os.ReadFile("../../../events/authorizer-malformed.json")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	ries := make([]*lambdatest.RIE, n)
	for i := range ries {
		ries[i] = lambdatest.StartRIE(t, bootstrap, nil)
	}
	seen := map[string]bool{}
	for _, r := range ries {
		if seen[r.Addr] {
			t.Fatalf("two emulators on %s", r.Addr)
		}
		seen[r.Addr] = true
	}
	var wg sync.WaitGroup
	for _, r := range ries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := r.Invoke(t, anonymous)
			if err != nil || !strings.Contains(string(body), `"degraded":true`) {
				t.Errorf("%s: anonymous event: %s, %v; want a degraded Allow", r.Addr, body, err)
			}
			_, err = r.Invoke(t, malformed)
			var fe *lambdatest.FunctionError
			if !errors.As(err, &fe) || fe.Message != "Unauthorized" {
				t.Errorf("%s: malformed event: %v, want the function error Unauthorized", r.Addr, err)
			}
		}()
	}
	wg.Wait()
}
