// Package faultproxy is a TCP proxy for tests that injects the network
// failures a Redis client meets in production, switchable while traffic
// flows: refused connections, a black hole, added latency and connections
// reset in the middle of a reply.
//
// The proxy listens on a loopback port picked at start and forwards every
// connection to one target address. It keeps its port across modes, so a
// client pointed at it sees one server that misbehaves in different ways.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the proxy does with connections.
type Mode int32

const (
	// Pass forwards bytes both ways unchanged (after any added latency).
	Pass Mode = iota
	// Refuse closes the listening socket, so connecting is refused, and
	// closes every open connection, as a stopped server would.
	Refuse
	// BlackHole accepts connections but never answers: bytes from clients
	// are read and dropped, and nothing reaches them. Open connections go
	// silent too. Leaving BlackHole closes every connection that lived
	// through it, whose streams are no longer in step.
	BlackHole
	// Reset forwards each request, then resets the client's connection
	// (SO_LINGER 0, so the client gets RST) after the first byte of the
	// reply: a reply cut off mid-way.
	Reset
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Refuse:
		return "refuse"
	case BlackHole:
		return "black-hole"
	case Reset:
		return "reset"
	default:
		return fmt.Sprintf("Mode(%d)", int32(m))
	}
}

// Proxy is a running fault-injection proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	target  string
	addr    string
	mode    atomic.Int32
	latency atomic.Int64 // nanoseconds added before each chunk of reply

	accepted atomic.Int64

	mu     sync.Mutex
	ln     net.Listener // nil while refusing
	conns  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup
}

// link is one proxied connection: the client's side and the target's.
type link struct {
	client, server net.Conn
	once           sync.Once
}

func (l *link) close(reset bool) {
	l.once.Do(func() {
		if reset {
			if tcp, ok := l.client.(*net.TCPConn); ok {
				// Linger 0 turns close into an RST.
				_ = tcp.SetLinger(0)
			}
		}
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// Start listens on a free loopback port and proxies to target
// ("host:port").
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, conns: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.serve(ln)
	return p, nil
}

// Addr is the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.addr }

// URL is the proxy's address as a redis:// URL.
func (p *Proxy) URL() string { return "redis://" + p.addr }

// Accepted counts the connections the proxy has accepted: the dials that
// reached it.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode { return Mode(p.mode.Load()) }

// SetLatency delays every chunk of bytes from the target to the client by
// d, in every mode that forwards. Zero removes the delay.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// SetMode switches the proxy to m. Switching to Refuse closes the listener
// and every connection; switching away from it listens again on the same
// port (and fails if another process took the port meanwhile). Switching
// away from BlackHole closes the connections that lived through it.
func (p *Proxy) SetMode(m Mode) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("faultproxy: closed")
	}
	prev := Mode(p.mode.Swap(int32(m)))
	if prev == m {
		return nil
	}
	if m == Refuse || prev == BlackHole {
		for l := range p.conns {
			l.close(false)
		}
	}
	if m == Refuse && p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	if m != Refuse && p.ln == nil {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			p.mode.Store(int32(Refuse))
			return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
		}
		p.ln = ln
		p.wg.Add(1)
		go p.serve(ln)
	}
	return nil
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for l := range p.conns {
		l.close(false)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	if p.Mode() == BlackHole {
		// Never dial: hold the connection and drop what arrives, until
		// the mode changes or the client gives up.
		l := &link{client: client, server: nopConn{}}
		if !p.track(l) {
			return
		}
		defer p.untrack(l)
		_, _ = io.Copy(io.Discard, client)
		l.close(false)
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		if tcp, ok := client.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server}
	if !p.track(l) {
		return
	}
	defer p.untrack(l)
	done := make(chan struct{}, 2)
	go func() { p.pump(l, client, server, false); done <- struct{}{} }()
	go func() { p.pump(l, server, client, true); done <- struct{}{} }()
	<-done
	l.close(false)
	<-done
}

func (p *Proxy) track(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.Mode() == Refuse {
		l.close(false)
		return false
	}
	p.conns[l] = struct{}{}
	return true
}

func (p *Proxy) untrack(l *link) {
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// pump copies from src to dst, applying the mode to every chunk. reply is
// true for the target-to-client direction.
func (p *Proxy) pump(l *link, src, dst net.Conn, reply bool) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if reply {
				if d := time.Duration(p.latency.Load()); d > 0 {
					time.Sleep(d)
				}
			}
			switch p.Mode() {
			case BlackHole:
				// Dropped.
			case Reset:
				if reply {
					_, _ = dst.Write(buf[:1])
					l.close(true)
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			default:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// nopConn stands in for the target side of a black-holed connection that
// was never dialed.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }
