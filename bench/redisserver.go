package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is the benchmark's own redis-server process, on a free
// loopback port, without persistence, so that every contender meets the
// same empty server and nothing else shares it.
type redisServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts redis-server on a free port of 127.0.0.1 (never 6379)
// and waits until it answers PING.
func startRedis(binary string) (*redisServer, error) {
	dir, err := os.MkdirTemp("", "slidegate-bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("start redis: temp dir: %w", err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("start redis: %w", err)
		}
		if port == 6379 {
			continue
		}
		s := &redisServer{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
		log, err := os.Create(filepath.Join(dir, "redis.log"))
		if err != nil {
			return nil, fmt.Errorf("start redis: log: %w", err)
		}
		s.cmd = exec.Command(binary,
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes")
		s.cmd.Stdout, s.cmd.Stderr = log, log
		if err := s.cmd.Start(); err != nil {
			log.Close()
			return nil, fmt.Errorf("start redis: %s: %w", binary, err)
		}
		log.Close()
		if err := s.waitReady(10 * time.Second); err == nil {
			return s, nil
		}
		s.stop()
	}
	return nil, fmt.Errorf("start redis: no attempt answered PING; see logs under %s", dir)
}

func (s *redisServer) waitReady(limit time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis at %s did not answer PING within %s", s.addr, limit)
}

// stop ends the server process this program started and removes its
// directory.
func (s *redisServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	_ = os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
