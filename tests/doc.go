// Package tests holds slidegate's integration tests: they start real
// redis-server processes (a single node and a Redis Cluster) on free
// loopback ports through internal/testkit/redistest and drive pkg/ratelimit,
// the functions and the local API against them. With
// REDIS_SERVER=valkey-server they run on Valkey instead; `make test` runs
// every test that starts a server on both.
package tests
