// Package tests holds slidegate's end-to-end tests, the ones that cross
// packages: the functions under the Lambda emulator, the local API, the
// template, the command, the contract and resilience across the product.
// They start real redis-server processes (a single node and a Redis
// Cluster) on free loopback ports through internal/testkit/redistest. With
// REDIS_SERVER=valkey-server they run on Valkey instead; `make test` runs
// every test that starts a server on both. The behaviour of pkg/ratelimit
// alone is proved beside it (go test ./pkg/ratelimit).
package tests
