package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The harness talks to the servers it manages through this minimal RESP2
// client rather than through go-redis, so that starting, probing and
// reconfiguring servers never depends on the client library under test (its
// handshakes, retries, redirects and pools) and every probe is exactly one
// command on one fresh connection with a hard deadline.

// commandTimeout bounds a single probe when the caller's context has no
// earlier deadline.
const commandTimeout = 2 * time.Second

// serverError is an error reply ("-ERR ...") sent by redis-server.
type serverError string

func (e serverError) Error() string { return string(e) }

// access is how the harness reaches a server: over TLS or plain TCP, and
// as which ACL user. The zero value is plain TCP as the default user.
type access struct {
	// tls makes the harness speak TLS. It does not verify the server's
	// certificate: the harness knows whom it talks to by process id (see
	// probeServer), and verifying is the job of the clients under test.
	tls bool
	// user and password, when password is set, are sent with AUTH before
	// every command.
	user, password string
}

// do sends one command to addr on a new plain connection as the default
// user; see access.do.
func do(ctx context.Context, addr string, args ...string) (string, error) {
	return access{}.do(ctx, addr, args...)
}

// do sends one command to addr on a new connection and returns its reply as
// a string: the text of a status reply, the payload of a bulk reply ("" for
// a nil bulk), or the decimal form of an integer reply. An error reply is
// returned as a serverError. Array replies are not supported: nothing the
// harness sends needs them.
func (a access) do(ctx context.Context, addr string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()

	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return "", fmt.Errorf("set deadline on %s: %w", addr, err)
		}
	}
	if a.tls {
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			return "", fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	r := bufio.NewReader(conn)
	if a.password != "" {
		auth := []string{"AUTH", a.password}
		if a.user != "" {
			auth = []string{"AUTH", a.user, a.password}
		}
		if _, err := roundTrip(conn, r, auth); err != nil {
			return "", fmt.Errorf("AUTH on %s: %w", addr, err)
		}
	}
	reply, err := roundTrip(conn, r, args)
	if err != nil {
		return "", fmt.Errorf("%s on %s: %w", args[0], addr, err)
	}
	return reply, nil
}

// roundTrip writes one command and reads its reply.
func roundTrip(w io.Writer, r *bufio.Reader, args []string) (string, error) {
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, arg := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(arg), arg)
	}
	if _, err := io.WriteString(w, req.String()); err != nil {
		return "", fmt.Errorf("send: %w", err)
	}
	return readReply(r)
}

// readReply reads one non-array RESP2 reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read reply: %w", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("read reply: empty line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", serverError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("read reply: bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("read bulk reply: %w", err)
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("read reply: unsupported reply type %q", line)
	}
}

// infoField returns the value of field in the text of an INFO or CLUSTER INFO
// reply, and whether it was present.
func infoField(info, field string) (string, bool) {
	for line := range strings.SplitSeq(info, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && name == field {
			return value, true
		}
	}
	return "", false
}
