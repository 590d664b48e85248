package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// startEcho runs a line echo server: the simplest real TCP peer.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip dials addr, sends a line and reads the echo within wait.
func roundTrip(addr string, wait time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestModes(t *testing.T) {
	p, err := Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })

	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	cases := []struct {
		name    string
		mode    Mode
		latency time.Duration
		check   func(reply string, err error, took time.Duration) string
	}{
		{"pass forwards", Pass, 0, func(r string, err error, _ time.Duration) string {
			if err != nil || r != "ping\n" {
				return "want the echo"
			}
			return ""
		}},
		{"refuse refuses to connect", Refuse, 0, func(_ string, err error, _ time.Duration) string {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				return "want ECONNREFUSED"
			}
			return ""
		}},
		{"black hole never answers", BlackHole, 0, func(_ string, err error, _ time.Duration) string {
			if !isTimeout(err) {
				return "want a timeout"
			}
			return ""
		}},
		{"reset cuts the reply", Reset, 0, func(r string, err error, _ time.Duration) string {
			if err == nil || r == "ping\n" {
				return "want a broken reply"
			}
			return ""
		}},
		{"latency delays the reply", Pass, 150 * time.Millisecond, func(r string, err error, took time.Duration) string {
			if err != nil || r != "ping\n" || took < 150*time.Millisecond {
				return "want the echo after 150ms"
			}
			return ""
		}},
		{"back to pass after all that", Pass, 0, func(r string, err error, _ time.Duration) string {
			if err != nil || r != "ping\n" {
				return "want the echo"
			}
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.SetMode(tc.mode); err != nil {
				t.Fatal(err)
			}
			p.SetLatency(tc.latency)
			start := time.Now()
			reply, err := roundTrip(p.Addr(), 500*time.Millisecond)
			if msg := tc.check(reply, err, time.Since(start)); msg != "" {
				t.Fatalf("mode %s: reply %q, err %v: %s", tc.mode, reply, err, msg)
			}
		})
	}
}

func TestLeavingBlackHoleClosesItsConnections(t *testing.T) {
	p, err := Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := p.SetMode(BlackHole); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("lost\n"))
	time.Sleep(50 * time.Millisecond)
	if err := p.SetMode(Pass); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 8)); err == nil {
		t.Fatal("a connection that lived through the black hole still answers")
	}
}
