// Package tests holds slidegate's end-to-end tests, the ones that cross
// packages: the functions under the Lambda emulator, the local API, the
// template, the command end to end and the contract. What one package
// does is proved beside it (go test ./pkg/ratelimit: the library and its
// resilience to Redis faults; go test ./internal/instance: one instance's
// decision, identities, tokens and secrets; go test ./internal/apihandler:
// the API function in-process; go test ./cmd/slidegate: the command's
// flags, check and controls). They start real redis-server
// processes (a single node and a Redis Cluster) on free loopback ports
// through internal/testkit/redistest. With REDIS_SERVER=valkey-server they
// run on Valkey instead (make test-valkey VALKEY_SCOPE=all; make test runs
// the library's again on Valkey, see scripts/test-valkey.sh).
package tests
