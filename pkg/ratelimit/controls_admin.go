package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Bounds of the live controls Redis may hold at once.
const (
	// maxControls bounds the identity controls in force: SetControl
	// refuses a new identity past it, so a flood of controls cannot grow
	// the index, or a listing, without bound. (The hash every instance
	// reads holds at most maxWatchedControls of them by tag, and one
	// overflow field for the rest.)
	maxControls = 10_000
)

// The admin scripts: they touch the index and the network hash, never a
// decision's keys, and are not preloaded (EVALSHA falls back to EVAL).
var (
	controlIndexSetScript   = mustLoadScript("control_index_set.lua")
	controlIndexLiftScript  = mustLoadScript("control_index_lift.lua")
	networkControlSetScript = mustLoadScript("network_controls_set.lua")
	controlWatchLiftScript  = mustLoadScript("control_watch_lift.lua")
)

// SetControl stores c as identity's live control, replacing any control
// the identity had (one per identity). c is validated at Redis's time
// (TIME; Options.Now when set) and SetAt is set to that time. The record
// is written at the identity's control key, in its hash slot, expiring at
// c.Until (PXAT, rounded up to the millisecond): Redis forgets it then,
// with nobody cleaning up. The identity's tag is first added to the index
// ListControls reads, scored by the end; entries whose end has passed are
// pruned then, and a new identity is refused with ErrInvalid and
// controls.ErrTooMany when 10,000 identity controls (maxControls) are
// already in force.
//
// Redis expires the record on its own clock, whatever Options.Now says: a
// stepped clock in the past sets records that are gone at once.
//
// The identity's tag and the control's end are then mirrored into the
// network-controls hash (field "i:<tag>"), which every instance's control
// watch reads at most once per controls.Propagation: a decision of a
// Limiter with Options.Controls reads the control key only of identities
// its watch lists. The hash holds at most 1,000 such fields
// (maxWatchedControls): when they are all live and the identity has none, the control's end
// extends the one overflow field instead (to the later of the two ends;
// lifting never brings it earlier), and every instance that reads it
// reads every identity's control key until that end, so no control is
// missed and each read of the hash stays small. A new control therefore
// applies from the first
// decision after each instance's next read of the hash, at most
// controls.Propagation (plus one read) after SetControl returns; a control
// replaced on an identity already listed applies from the next decision.
// A Gate's deny cache keeps a denial at most controls.Propagation longer.
//
// The index and the hash are written before the record, so that a control
// in force is always listed and watched: a failure in between leaves an
// entry without a record, which ListControls skips and decisions read as
// no control.
func (l *Limiter) SetControl(ctx context.Context, identity string, c controls.Control) error {
	if identity == "" {
		return fmt.Errorf("set control: %w: no identity", ErrInvalid)
	}
	ctx, cancel := l.adminContext(ctx)
	defer cancel()
	now, err := l.adminNow(ctx)
	if err != nil {
		return fmt.Errorf("set control: %w", err)
	}
	if err := c.Validate(now); err != nil {
		return fmt.Errorf("set control: %w", err)
	}
	c.SetAt = now
	tag := l.keys.identityTag(identity)
	endMs := ceilMilli(c.Until)
	vals, err := controlIndexSetScript.run(ctx, l.client, []any{nil, nil, 1, l.keys.controlIndexKey(),
		strconv.FormatInt(now.UnixMilli(), 10), tag, strconv.FormatInt(endMs, 10), strconv.Itoa(maxControls)})
	if err != nil {
		return fmt.Errorf("set control: index: %w: %w", ErrUnavailable, err)
	}
	if n, ok := firstInt(vals); !ok {
		return fmt.Errorf("set control: %w: index script replied %v", ErrUnavailable, vals)
	} else if n < 0 {
		return fmt.Errorf("set control: %w: %w: %d identity controls are in force, the most allowed; lift some first", ErrInvalid, controls.ErrTooMany, maxControls)
	}
	vals, err = networkControlSetScript.run(ctx, l.client, []any{nil, nil, 1, l.keys.networkControlsKey(),
		strconv.FormatInt(now.UnixMicro(), 10), identityField(tag), strconv.FormatInt(c.Until.UnixMicro(), 10),
		strconv.FormatInt(endMs, 10), strconv.Itoa(maxWatchedControls), overflowField})
	if err != nil {
		return fmt.Errorf("set control: watch: %w: %w", ErrUnavailable, err)
	}
	if n, ok := firstInt(vals); !ok || n < 0 {
		// The script never refuses an identity: past the bound it
		// writes the overflow field.
		return fmt.Errorf("set control: %w: watch script replied %v", ErrUnavailable, vals)
	}
	err = l.client.SetArgs(ctx, l.keys.controlKey(tag), formatControlRecord(c), redis.SetArgs{ExpireAt: time.UnixMilli(endMs)}).Err()
	if err != nil {
		return fmt.Errorf("set control: record: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// LiftControl deletes identity's control and returns it, with false when
// the identity had none (or its control had ended). A malformed record is
// deleted too, and returned as the zero Control with true. Decisions stop
// applying the control from their next script call on.
func (l *Limiter) LiftControl(ctx context.Context, identity string) (controls.Control, bool, error) {
	if identity == "" {
		return controls.Control{}, false, fmt.Errorf("lift control: %w: no identity", ErrInvalid)
	}
	ctx, cancel := l.adminContext(ctx)
	defer cancel()
	tag := l.keys.identityTag(identity)
	rec, err := l.client.GetDel(ctx, l.keys.controlKey(tag)).Result()
	if errors.Is(err, redis.Nil) {
		return controls.Control{}, false, nil
	}
	if err != nil {
		return controls.Control{}, false, fmt.Errorf("lift control: %w: %w", ErrUnavailable, err)
	}
	c, perr := parseControlRecord(rec)
	if perr != nil {
		// A malformed record has no end to compare: its index and watch
		// entries go when their ends pass, and the listing skips it
		// meanwhile (decisions read its key: no record, no control).
		return controls.Control{}, true, nil
	}
	_, err = controlIndexLiftScript.run(ctx, l.client, []any{nil, nil, 1, l.keys.controlIndexKey(),
		tag, strconv.FormatInt(ceilMilli(c.Until), 10)})
	if err != nil {
		return c, true, fmt.Errorf("lift control: the control is lifted, its index entry left: %w: %w", ErrUnavailable, err)
	}
	_, err = controlWatchLiftScript.run(ctx, l.client, []any{nil, nil, 1, l.keys.networkControlsKey(),
		identityField(tag), strconv.FormatInt(c.Until.UnixMicro(), 10)})
	if err != nil {
		return c, true, fmt.Errorf("lift control: the control is lifted, its watch entry left: %w: %w", ErrUnavailable, err)
	}
	return c, true, nil
}

// GetControl returns identity's control in force, with false when it has
// none. A record that cannot be read is an error wrapping
// controls.ErrMalformed (decisions ignore such a record).
func (l *Limiter) GetControl(ctx context.Context, identity string) (controls.Control, bool, error) {
	if identity == "" {
		return controls.Control{}, false, fmt.Errorf("get control: %w: no identity", ErrInvalid)
	}
	ctx, cancel := l.adminContext(ctx)
	defer cancel()
	rec, err := l.client.Get(ctx, l.keys.controlKey(l.keys.identityTag(identity))).Result()
	if errors.Is(err, redis.Nil) {
		return controls.Control{}, false, nil
	}
	if err != nil {
		return controls.Control{}, false, fmt.Errorf("get control: %w: %w", ErrUnavailable, err)
	}
	c, err := parseControlRecord(rec)
	if err != nil {
		return controls.Control{}, false, fmt.Errorf("get control: the identity's record is ignored by decisions: %w", err)
	}
	if l.now != nil && !c.Until.After(l.now()) {
		// Redis expires the record on its own clock; a stepped clock
		// may have passed the end first.
		return controls.Control{}, false, nil
	}
	return c, true, nil
}

// ListControls returns the identity controls in force, soonest end first
// (ties by tag): it reads the index and then every listed record, one GET
// each, pipelined (per node in a cluster, where records live in their
// identities' slots). Index entries whose end has passed, or whose record
// is gone (expired or lifted), are left out; a record that cannot be read
// is listed as Malformed.
func (l *Limiter) ListControls(ctx context.Context) ([]controls.Entry, error) {
	ctx, cancel := l.adminContext(ctx)
	defer cancel()
	now, err := l.adminNow(ctx)
	if err != nil {
		return nil, fmt.Errorf("list controls: %w", err)
	}
	tags, err := l.client.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: l.keys.controlIndexKey(), ByScore: true,
		Start: "(" + strconv.FormatInt(now.UnixMilli(), 10), Stop: "+inf",
		Count: maxControls,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("list controls: index: %w: %w", ErrUnavailable, err)
	}
	const batch = 500
	entries := make([]controls.Entry, 0, len(tags))
	for start := 0; start < len(tags); start += batch {
		part := tags[start:min(start+batch, len(tags))]
		cmds := make([]*redis.StringCmd, len(part))
		_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, tag := range part {
				cmds[i] = p.Get(ctx, l.keys.controlKey(tag))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("list controls: records: %w: %w", ErrUnavailable, err)
		}
		for i, cmd := range cmds {
			rec, err := cmd.Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list controls: record: %w: %w", ErrUnavailable, err)
			}
			c, perr := parseControlRecord(rec)
			if perr != nil {
				entries = append(entries, controls.Entry{Tag: part[i], Malformed: true})
				continue
			}
			if !c.Until.After(now) {
				continue
			}
			entries = append(entries, controls.Entry{Tag: part[i], Control: c})
		}
	}
	return entries, nil
}

// SetNetworkControl stores c, a block or an exemption, on every address of
// network, replacing any control the network had. network must be a valid
// IPv4 or IPv6 prefix with no host bits set (203.0.113.0/24, not
// 203.0.113.7/24), and not an IPv4-mapped IPv6 prefix (addresses are
// matched unmapped: write it as IPv4): a prefix that could be read as
// several networks is refused, not guessed at. c is validated and SetAt set
// as by SetControl. The record is a field of the one hash every instance
// reads; fields whose control has ended are removed on each write, and a
// new network is refused with ErrInvalid and controls.ErrTooMany when
// controls.MaxNetworks are in force.
//
// Instances see the change at their next read, at most
// controls.Propagation later (NetworkControlCache).
func (l *Limiter) SetNetworkControl(ctx context.Context, network netip.Prefix, c controls.Control) error {
	if err := checkNetwork(network); err != nil {
		return fmt.Errorf("set network control: %w", err)
	}
	if c.Kind != controls.Block && c.Kind != controls.Exempt {
		return fmt.Errorf("set network control: %w: a network takes a block or an exemption, not a %s", ErrInvalid, c.Kind)
	}
	ctx, cancel := l.adminContext(ctx)
	defer cancel()
	now, err := l.adminNow(ctx)
	if err != nil {
		return fmt.Errorf("set network control: %w", err)
	}
	if err := c.Validate(now); err != nil {
		return fmt.Errorf("set network control: %w", err)
	}
	c.SetAt = now
	vals, err := networkControlSetScript.run(ctx, l.client, []any{nil, nil, 1, l.keys.networkControlsKey(),
		strconv.FormatInt(now.UnixMicro(), 10), network.String(), formatControlRecord(c),
		strconv.FormatInt(ceilMilli(c.Until), 10), strconv.Itoa(controls.MaxNetworks), overflowField})
	if err != nil {
		return fmt.Errorf("set network control: %w: %w", ErrUnavailable, err)
	}
	if n, ok := firstInt(vals); !ok {
		return fmt.Errorf("set network control: %w: script replied %v", ErrUnavailable, vals)
	} else if n < 0 {
		return fmt.Errorf("set network control: %w: %w: %d network controls are in force, the most allowed; lift some first", ErrInvalid, controls.ErrTooMany, controls.MaxNetworks)
	}
	return nil
}

// LiftNetworkControl deletes network's control and returns it, with false
// when it had none in force (an ended one is deleted all the same). A
// malformed record is deleted and returned as the zero Control with true.
func (l *Limiter) LiftNetworkControl(ctx context.Context, network netip.Prefix) (controls.Control, bool, error) {
	if err := checkNetwork(network); err != nil {
		return controls.Control{}, false, fmt.Errorf("lift network control: %w", err)
	}
	ctx, cancel := l.adminContext(ctx)
	defer cancel()
	now, err := l.adminNow(ctx)
	if err != nil {
		return controls.Control{}, false, fmt.Errorf("lift network control: %w", err)
	}
	key, field := l.keys.networkControlsKey(), network.String()
	var get *redis.StringCmd
	_, err = l.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.HGet(ctx, key, field)
		p.HDel(ctx, key, field)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return controls.Control{}, false, nil
	}
	if err != nil {
		return controls.Control{}, false, fmt.Errorf("lift network control: %w: %w", ErrUnavailable, err)
	}
	c, err := parseControlRecord(get.Val())
	if err != nil {
		return controls.Control{}, true, nil
	}
	if !c.Until.After(now) {
		return controls.Control{}, false, nil
	}
	return c, true, nil
}

// NetworkControls reads every network control in force (one HGETALL, at
// Redis's time or Options.Now): blocks first, then exemptions, each by
// network. Fields that cannot be read (a network or a record not written
// by SetNetworkControl) are skipped; when there were any, the list comes
// with an error wrapping controls.ErrMalformed that counts them. More than
// controls.MaxNetworks in force keeps the blocks first, and says so with an
// error wrapping controls.ErrTooMany. A failure to read is ErrUnavailable,
// with no list.
func (l *Limiter) NetworkControls(ctx context.Context) ([]controls.Network, error) {
	ctx, cancel := l.adminContext(ctx)
	defer cancel()
	now, err := l.adminNow(ctx)
	if err != nil {
		return nil, fmt.Errorf("network controls: %w", err)
	}
	return l.readNetworkControls(ctx, now)
}

// readNetworkControls is NetworkControls at now, without a deadline of
// its own.
func (l *Limiter) readNetworkControls(ctx context.Context, now time.Time) ([]controls.Network, error) {
	s, err := l.readControlsHash(ctx, now)
	if s == nil {
		return nil, err
	}
	return s.networks, s.networkProblems
}

// parseNetworkControls reads the hash of network controls at now: the
// controls in force, strictest first (blocks, then exemptions; then by
// network, for a deterministic order), the identity controls it mirrors
// (fields "i:<tag>", each holding the control's end in Unix µs: the tags
// in force, with their ends, at most maxWatchedControls+1 of them), how
// many identity fields are in force, the end of the overflow field
// ("i:*", Unix µs) when it is in force (0 otherwise), and how many fields
// could not be read. An identity field whose end cannot be read is
// counted as malformed and kept with no end (its identity's control key
// is read: the strictest reading); an overflow field whose end cannot be
// read is counted as malformed and in force with no end (every control
// key is read).
func parseNetworkControls(fields map[string]string, now time.Time) ([]controls.Network, map[string]int64, int, int64, int) {
	list := make([]controls.Network, 0, min(len(fields), controls.MaxNetworks+1))
	var tags map[string]int64
	identities, malformed := 0, 0
	var overflowUntil int64
	nowUs := now.UnixMicro()
	for field, rec := range fields {
		if tag, ok := isIdentityField(field); ok {
			if tag == "" {
				malformed++
				continue
			}
			end, err := parseDigits(rec)
			if err != nil {
				malformed++
				end = math.MaxInt64
			} else if end <= nowUs {
				continue
			}
			if field == overflowField {
				overflowUntil = end
				continue
			}
			identities++
			if tags == nil {
				tags = make(map[string]int64)
			}
			if len(tags) <= maxWatchedControls {
				tags[tag] = end
			}
			continue
		}
		p, err := netip.ParsePrefix(field)
		if err != nil || checkNetwork(p) != nil || p.String() != field {
			malformed++
			continue
		}
		c, err := parseControlRecord(rec)
		if err != nil || (c.Kind != controls.Block && c.Kind != controls.Exempt) {
			malformed++
			continue
		}
		if c.Until.After(now) {
			list = append(list, controls.Network{Prefix: p, Control: c})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Control.Kind != b.Control.Kind {
			return a.Control.Kind == controls.Block
		}
		if a.Prefix.Addr() != b.Prefix.Addr() {
			return a.Prefix.Addr().Less(b.Prefix.Addr())
		}
		return a.Prefix.Bits() < b.Prefix.Bits()
	})
	return list, tags, identities, overflowUntil, malformed
}

// checkNetwork refuses a prefix a network control cannot be set on.
func checkNetwork(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("%w: not a network prefix", ErrInvalid)
	case p.Addr().Zone() != "":
		return fmt.Errorf("%w: network %s has a zone", ErrInvalid, p)
	case p.Addr().Is4In6():
		return fmt.Errorf("%w: network %s is IPv4-mapped IPv6; write it as IPv4 (addresses are matched unmapped)", ErrInvalid, p)
	case p.Masked() != p:
		return fmt.Errorf("%w: network %s has host bits set: it would be %s; write the network's first address (or the prefix length meant)", ErrInvalid, p, p.Masked())
	}
	return nil
}

// Tag is identity's hash tag, as its keys and controls.Entry carry it.
func (l *Limiter) Tag(identity string) string { return l.keys.identityTag(identity) }

// Time is the time the Limiter's admin calls and decisions work at:
// Options.Now when set, else Redis's clock (TIME), which a control's end
// is compared with. A caller computing a control's end from a duration
// should start from it rather than from its own clock.
func (l *Limiter) Time(ctx context.Context) (time.Time, error) {
	ctx, cancel := l.adminContext(ctx)
	defer cancel()
	return l.adminNow(ctx)
}

// adminContext applies Options.Timeout to one admin call, as Reset does.
func (l *Limiter) adminContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout > 0 {
		return context.WithTimeout(ctx, l.timeout)
	}
	return ctx, func() {}
}

// adminNow is the time an admin call works at: Options.Now, or Redis's
// clock, which the decisions' scripts compare the ends with.
func (l *Limiter) adminNow(ctx context.Context) (time.Time, error) {
	if l.now != nil {
		return l.now(), nil
	}
	t, err := l.client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: redis time: %w", ErrUnavailable, err)
	}
	return t, nil
}

// ceilMilli is t in Unix milliseconds, rounded up: a record expires no
// earlier than its control ends.
func ceilMilli(t time.Time) int64 {
	us := t.UnixMicro()
	ms := us / 1000
	if us%1000 > 0 {
		ms++
	}
	return ms
}

// firstInt is a script reply's first value.
func firstInt(vals []any) (int64, bool) {
	if len(vals) == 0 {
		return 0, false
	}
	n, ok := vals[0].(int64)
	return n, ok
}
