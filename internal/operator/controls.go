package operator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// ControlRequest is one change or reading of live controls: what the
// slidegate command sends the operator function (as JSON), and what it
// applies itself on a direct connection. Both go through ApplyControl.
type ControlRequest struct {
	// Action is block, exempt, scale, lift, get (one identity's control)
	// or list (every control).
	Action string `json:"action"`
	// Identity is the caller exactly as the functions count it
	// (identity.CanonicalIdentity): "ip:<IPv4 address>", "ip:<IPv6
	// prefix of RATE_LIMIT_IPV6_PREFIX bits>" (the address alone at
	// 128), "key:<sha256 hex, lower case>", "sub:<subject>", or
	// "hash:<32 hex digits, lower case>", the identity's hash as the logs
	// print it (the command resolves its flags into it as inspect does);
	// any other spelling is refused with the one to send. It is hashed
	// before it reaches Redis or a log.
	Identity string `json:"identity,omitempty"`
	// Network is a CIDR with no host bits set, for block, exempt and lift.
	Network string `json:"network,omitempty"`
	// Duration is how long the control lasts: a Go duration ("90m", "1h")
	// or a whole number of days ("7d"), at most 30 days.
	Duration string `json:"duration,omitempty"`
	// Factor multiplies a scaled caller's limits (0.001 to 1000, three
	// decimals at most).
	Factor float64 `json:"factor,omitempty"`
	// Reason says why, for whoever lists controls later.
	Reason string `json:"reason,omitempty"`
	// By names who set (or lifts) the control: recorded with a control,
	// logged by the operator function for a lift. It is what the caller
	// asserts: the authoritative record of an invocation of the operator
	// function is CloudTrail's.
	By string `json:"by,omitempty"`
}

// ControlView is one control as a reply shows it.
type ControlView struct {
	// Kind is block, exempt or scale; "malformed" for a record that cannot
	// be read (decisions ignore it).
	Kind string `json:"kind"`
	// Tag is an identity's key hash tag (identities are stored hashed),
	// and Hash the same 128 bits in hex: the identity as the logs, the
	// Contributor Insights rules and the dashboard print it, which every
	// control command and inspect accept (--identity). Network is a
	// network control's CIDR. Either Tag and Hash or Network is set.
	Tag     string    `json:"tag,omitempty"`
	Hash    string    `json:"hash,omitempty"`
	Network string    `json:"network,omitempty"`
	Factor  float64   `json:"factor,omitempty"`
	SetBy   string    `json:"setBy,omitempty"`
	SetAt   time.Time `json:"setAt,omitzero"`
	Until   time.Time `json:"until,omitzero"`
	Reason  string    `json:"reason,omitempty"`
}

// ControlReply is ApplyControl's answer.
type ControlReply struct {
	// Action echoes the request's.
	Action string `json:"action"`
	// Found is true when lift removed a control or get found one.
	Found bool `json:"found"`
	// Control is the control set, lifted or read.
	Control *ControlView `json:"control,omitempty"`
	// Controls are the list's identity controls, soonest end first;
	// Networks its network controls, blocks first.
	Controls []ControlView `json:"controls,omitempty"`
	Networks []ControlView `json:"networks,omitempty"`
	// Warning says what a list could not read (malformed network fields,
	// too many).
	Warning string `json:"warning,omitempty"`
}

// Bounds of a control request.
const (
	// MaxControlRequest bounds a request's JSON, in bytes.
	MaxControlRequest = 4096
	// maxIdentityLen bounds an identity: a kind and a 512-byte subject.
	maxIdentityLen = 4 + 512
)

// errBadRequest marks a request refused before Redis is asked.
var errBadRequest = errors.New("bad control request")

// DecodeControlRequest reads one request strictly: at most
// MaxControlRequest bytes of one JSON object with no unknown field.
func DecodeControlRequest(payload []byte) (ControlRequest, error) {
	if len(payload) > MaxControlRequest {
		return ControlRequest{}, fmt.Errorf("%w: %d bytes, more than %d", errBadRequest, len(payload), MaxControlRequest)
	}
	if err := checkFieldNames(payload); err != nil {
		return ControlRequest{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var req ControlRequest
	if err := dec.Decode(&req); err != nil {
		return ControlRequest{}, fmt.Errorf("%w: %s", errBadRequest, truncate.Text(err.Error(), 200))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ControlRequest{}, fmt.Errorf("%w: data after the JSON object", errBadRequest)
	}
	return req, nil
}

// controlFields are ControlRequest's JSON names, exactly.
var controlFields = map[string]bool{"action": true, "identity": true, "network": true, "duration": true, "factor": true, "reason": true, "by": true}

// checkFieldNames refuses what encoding/json would let through: a field
// named in another case ("Action", which it matches case-insensitively) or
// given twice (it keeps the last), either of which could make one payload
// read two ways.
func checkFieldNames(payload []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		return fmt.Errorf("%w: %s", errBadRequest, truncate.Text(err.Error(), 200))
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if _, err := dec.Token(); err != nil { // the object's {
		return fmt.Errorf("%w: %s", errBadRequest, truncate.Text(err.Error(), 200))
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %s", errBadRequest, truncate.Text(err.Error(), 200))
		}
		name, _ := tok.(string)
		if !controlFields[name] {
			return fmt.Errorf("%w: unknown field %q (field names are lower case: action, identity, network, duration, factor, reason, by)", errBadRequest, truncate.Text(name, 32))
		}
		if seen[name] {
			return fmt.Errorf("%w: field %q given twice", errBadRequest, name)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("%w: %s", errBadRequest, truncate.Text(err.Error(), 200))
		}
	}
	return nil
}

// ParseControlDuration reads a control's duration: a Go duration or a
// whole number of days ("7d"), positive.
func ParseControlDuration(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 366 {
			return 0, fmt.Errorf("%w: duration %q: want a Go duration (90m, 1h) or whole days (7d)", errBadRequest, truncate.Text(s, truncate.QuotedLen))
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%w: duration %q: want a Go duration (90m, 1h) or whole days (7d)", errBadRequest, truncate.Text(s, truncate.QuotedLen))
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%w: duration %q is not positive", errBadRequest, truncate.Text(s, truncate.QuotedLen))
	}
	if d > controls.MaxDuration {
		return 0, fmt.Errorf("%w: duration %s is more than the %s a control may last", errBadRequest, d, controls.MaxDuration)
	}
	return d, nil
}

// ParseControlNetwork reads a network control's CIDR: no host bits, no
// IPv4-mapped form, as RATE_LIMIT_NETWORKS is read.
func ParseControlNetwork(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: network %q is not a CIDR", errBadRequest, truncate.Text(s, truncate.QuotedLen))
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%w: network %s is IPv4-mapped; write it as IPv4", errBadRequest, p)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%w: network %s has host bits set: it would be %s; write the network's first address (or the prefix length meant)", errBadRequest, p, m)
	}
	return p, nil
}

// checkIdentity refuses an identity the functions could never count: one
// that is not as identity.CanonicalIdentity reads it under ipv6Prefix,
// with the identity to send instead when there is one.
func checkIdentity(id string, ipv6Prefix int) error {
	if id == "" {
		return fmt.Errorf("%w: no identity", errBadRequest)
	}
	if len(id) > maxIdentityLen || !utf8.ValidString(id) {
		return fmt.Errorf("%w: the identity is not valid UTF-8 of at most %d bytes", errBadRequest, maxIdentityLen)
	}
	canonical, err := identity.CanonicalIdentity(id, ipv6Prefix)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if canonical != id {
		return fmt.Errorf("%w: identity %q is %w: send %q", errBadRequest, truncate.Text(id, truncate.QuotedLen), identity.ErrNotCanonical, canonical)
	}
	return nil
}

// ApplyControl carries out req on l: the one place a request becomes
// admin calls, for the command on a direct connection and for the
// operator function alike. A refused request is an error saying why;
// nothing is written then. An identity must be exactly one the functions
// count (identity.CanonicalIdentity, IPv6 callers per ipv6Prefix bits):
// any other spelling is refused with the identity to send, so that no
// control is acknowledged on an identity no decision reads.
func ApplyControl(ctx context.Context, l *ratelimit.Limiter, ipv6Prefix int, req ControlRequest) (ControlReply, error) {
	reply := ControlReply{Action: req.Action}
	if req.Action == "list" {
		if req.Identity != "" || req.Network != "" || req.Duration != "" || req.Factor != 0 || req.Reason != "" || req.By != "" {
			return reply, fmt.Errorf("%w: list takes no other field", errBadRequest)
		}
		return listControls(ctx, l, reply)
	}
	if (req.Identity == "") == (req.Network == "") {
		return reply, fmt.Errorf("%w: give exactly one of identity and network", errBadRequest)
	}
	var network netip.Prefix
	if req.Network != "" {
		var err error
		if network, err = ParseControlNetwork(req.Network); err != nil {
			return reply, err
		}
	} else if err := checkIdentity(req.Identity, ipv6Prefix); err != nil {
		return reply, err
	} else if h, ok := strings.CutPrefix(req.Identity, identity.KindHash); ok && hashOfTag(l.Controls().Tag(req.Identity)) != h {
		// A limiter without ratelimit.Options.HashedIdentities would act
		// on the hash of the hash: a control acknowledged on nobody.
		return reply, fmt.Errorf("%s: identity %s: this connection does not read identities given as their hash", req.Action, req.Identity)
	}
	switch req.Action {
	case "block", "exempt", "scale":
		return setControl(ctx, l, req, network, reply)
	case "lift", "get":
		if req.Duration != "" || req.Factor != 0 || req.Reason != "" {
			return reply, fmt.Errorf("%w: %s takes only an identity or a network (and by)", errBadRequest, req.Action)
		}
		var c controls.Control
		var err error
		switch {
		case req.Action == "lift" && req.Network != "":
			c, reply.Found, err = l.Controls().LiftNetwork(ctx, network)
		case req.Action == "lift":
			c, reply.Found, err = l.Controls().Lift(ctx, req.Identity)
		case req.Network != "":
			return reply, fmt.Errorf("%w: get takes an identity; list shows the networks", errBadRequest)
		default:
			c, reply.Found, err = l.Controls().Get(ctx, req.Identity)
			if errors.Is(err, controls.ErrMalformed) {
				reply.Found, err = true, nil
				tag := l.Controls().Tag(req.Identity)
				reply.Control = &ControlView{Kind: "malformed", Tag: tag, Hash: hashOfTag(tag)}
				return reply, nil
			}
		}
		if err != nil {
			return reply, fmt.Errorf("%s: %w", req.Action, err)
		}
		if reply.Found {
			v := viewOf(c, l.Controls().Tag(req.Identity), network)
			if req.Network != "" {
				v.Tag, v.Hash = "", ""
			}
			reply.Control = &v
		}
		return reply, nil
	}
	return reply, fmt.Errorf("%w: action %q: want block, exempt, scale, lift, get or list", errBadRequest, truncate.Text(req.Action, 32))
}

func setControl(ctx context.Context, l *ratelimit.Limiter, req ControlRequest, network netip.Prefix, reply ControlReply) (ControlReply, error) {
	kind, err := controls.ParseKind(req.Action)
	if err != nil {
		return reply, err
	}
	if kind == controls.Scale && req.Network != "" {
		return reply, fmt.Errorf("%w: a network takes a block or an exemption, not a scale", errBadRequest)
	}
	if kind != controls.Scale && req.Factor != 0 {
		return reply, fmt.Errorf("%w: %s takes no factor", errBadRequest, req.Action)
	}
	d, err := ParseControlDuration(req.Duration)
	if err != nil {
		return reply, err
	}
	now, err := l.Controls().Time(ctx)
	if err != nil {
		return reply, fmt.Errorf("%s: %w", req.Action, err)
	}
	c := controls.Control{Kind: kind, Factor: req.Factor, Until: now.Add(d), Reason: req.Reason, SetBy: req.By}
	if req.Network != "" {
		err = l.Controls().SetNetwork(ctx, network, c)
	} else {
		err = l.Controls().Set(ctx, req.Identity, c)
	}
	if err != nil {
		return reply, fmt.Errorf("%s: %w", req.Action, err)
	}
	c.SetAt = now.Truncate(time.Millisecond) // as the record keeps it
	v := viewOf(c, l.Controls().Tag(req.Identity), network)
	if req.Network != "" {
		v.Tag, v.Hash = "", ""
	}
	reply.Found, reply.Control = true, &v
	return reply, nil
}

func listControls(ctx context.Context, l *ratelimit.Limiter, reply ControlReply) (ControlReply, error) {
	entries, err := l.Controls().List(ctx)
	if err != nil {
		return reply, fmt.Errorf("list: %w", err)
	}
	for _, e := range entries {
		if e.Malformed {
			reply.Controls = append(reply.Controls, ControlView{Kind: "malformed", Tag: e.Tag, Hash: hashOfTag(e.Tag)})
			continue
		}
		reply.Controls = append(reply.Controls, viewOf(e.Control, e.Tag, netip.Prefix{}))
	}
	nets, err := l.Controls().Networks(ctx)
	if err != nil && nets == nil {
		return reply, fmt.Errorf("list: %w", err)
	}
	if err != nil {
		reply.Warning = err.Error()
	}
	for _, n := range nets {
		reply.Networks = append(reply.Networks, viewOf(n.Control, "", n.Prefix))
	}
	return reply, nil
}

func viewOf(c controls.Control, tag string, network netip.Prefix) ControlView {
	v := ControlView{Kind: c.Kind.String(), Tag: tag, Hash: hashOfTag(tag), Factor: c.Factor, SetBy: c.SetBy, Reason: c.Reason,
		SetAt: c.SetAt.UTC(), Until: c.Until.UTC()}
	if network.IsValid() {
		v.Network, v.Tag, v.Hash = network.String(), "", ""
	}
	return v
}

// hashOfTag is an identity's hash as the logs print it (hex) from its key
// hash tag (the same 128 bits, unpadded base64url); "" for "".
func hashOfTag(tag string) string {
	b, err := base64.RawURLEncoding.DecodeString(tag)
	if err != nil {
		return ""
	}
	return hex.EncodeToString(b)
}

// IsBadRequest reports whether err refused a request before Redis was
// asked (or Redis refused its values), as opposed to an outage.
func IsBadRequest(err error) bool {
	return errors.Is(err, errBadRequest) || errors.Is(err, ratelimit.ErrInvalid)
}
