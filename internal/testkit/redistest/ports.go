package redistest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

const (
	// reservedPort is never handed out: a Redis unrelated to the tests may be
	// listening there, and a test must not touch it even by accident.
	reservedPort = 6379

	// clusterBusOffset is how far above its client port a cluster node
	// listens for the cluster bus (Redis's default cluster-port).
	clusterBusOffset = 10000

	// maxClusterPort keeps port+clusterBusOffset a valid port with room to
	// spare.
	maxClusterPort = 55000

	// portAttempts bounds how many candidate ports pickPort tries.
	portAttempts = 100
)

// pickPort returns a loopback port that was free a moment ago. Nothing holds
// it afterwards, so another process may take it before redis-server binds;
// callers detect that (errPortInUse) and pick again. With clusterBus, the port
// is at most maxClusterPort and port+clusterBusOffset was free too.
func pickPort(clusterBus bool) (int, error) {
	var lastErr error
	for range portAttempts {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		if port == reservedPort {
			continue
		}
		if !clusterBus {
			return port, nil
		}
		bus := port + clusterBusOffset
		if port > maxClusterPort || bus == reservedPort {
			continue
		}
		if err := probePort(bus); err != nil {
			lastErr = err
			continue
		}
		return port, nil
	}
	if lastErr == nil {
		lastErr = errors.New("no candidate in the allowed range")
	}
	return 0, fmt.Errorf("pick free port after %d attempts: %w", portAttempts, lastErr)
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen on 127.0.0.1:0: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// probePort reports whether port can be listened on right now.
func probePort(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("probe port %d: %w", port, err)
	}
	return l.Close()
}
