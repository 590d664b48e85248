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
// The server is redis-server unless REDIS_SERVER names another binary, such
// as valkey-server: the harness starts Redis 7 and Valkey 8 alike (see
// Binaries and FindEngine). scripts/ensure-redis.sh installs redis-server and
// scripts/ensure-valkey.sh valkey-server.
// Servers are child processes of the test binary: t.Cleanup stops them, and
// on Linux the kernel kills them if the binary dies before its cleanups run.
package redistest

import (
	"testing"
)

// RequireRedis fails t, with instructions, unless the server binary
// (redis-server, or what REDIS_SERVER names) is found. StartServer and
// StartCluster call it; tests may call it first to fail before doing other
// set-up.
func RequireRedis(t testing.TB) {
	t.Helper()
	if _, err := serverBinary(); err != nil {
		t.Fatalf("this test needs a Redis or Valkey server: %v; "+
			"run scripts/ensure-redis.sh (or scripts/ensure-valkey.sh for %s=valkey-server)", err, ServerEnv)
	}
}
