// Package tests holds slidegate's integration tests: they start real
// redis-server processes (a single node and a Redis Cluster) on free
// loopback ports through internal/redistest and drive pkg/ratelimit, the
// functions and the local API against them.
package tests
