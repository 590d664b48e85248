// Package redistest starts real redis-server processes for integration tests:
// single servers (StartServer) and Redis Clusters (StartCluster), each on
// free loopback ports picked at start (never 6379), with no persistence, and
// stopped when the test that started them finishes.
//
// StartServerWith adds what production connections need: TLS with a
// certificate from a throwaway CA made at test time (NewCA, CA.Issue), an
// admin ACL user for the harness so that a test may lock the default user
// out, and one-node clusters for the cluster protocol over TLS.
//
// It needs redis-server on PATH; scripts/ensure-redis.sh installs it.
// Servers are child processes of the test binary: t.Cleanup stops them, and
// on Linux the kernel kills them if the binary dies before its cleanups run.
package redistest

import (
	"os/exec"
	"testing"
)

// RequireRedis fails t, with instructions, unless redis-server is on PATH.
// StartServer and StartCluster call it; tests may call it first to fail
// before doing other set-up.
func RequireRedis(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is required for this test but is not on PATH (%v); "+
			"run scripts/ensure-redis.sh or `apt-get install redis-server`", err)
	}
}
