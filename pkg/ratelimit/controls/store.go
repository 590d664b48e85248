package controls

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/ctlstore"
	"github.com/slidegate/slidegate/pkg/ratelimit/internal/errs"
)

// Store sets, lifts and lists the live controls of one Limiter's keys: the
// Limiter's Controls method returns it, sharing the Limiter's client, key
// prefix, identity hashing (Options.IdentityHashKey and
// Options.HashedIdentities), Options.Timeout, Options.Now and control
// watch. It is safe for concurrent use. Its zero value is not: a Store
// comes only from a Limiter.
type Store ctlstore.Handle

// cfg is what the Store shares with its Limiter.
func (s *Store) cfg() *ctlstore.Config { return (*ctlstore.Handle)(s).Config() }

// maxControls bounds the identity controls in force: Set refuses a new
// identity past it, so a flood of controls cannot grow the index, or a
// listing, without bound. (The hash every instance reads holds at most
// ctlstore.MaxWatched of them by tag, and one overflow field for the
// rest.)
const maxControls = 10_000

// Set stores c as identity's live control, replacing any control
// the identity had (one per identity). c is validated at Redis's time
// (TIME; Options.Now when set) and SetAt is set to that time. The record
// is written at the identity's control key, in its hash slot, expiring at
// c.Until (PXAT, rounded up to the millisecond): Redis forgets it then,
// with nobody cleaning up. The identity's tag is first added to the index
// List reads, scored by the end; entries whose end has passed are
// pruned then, and a new identity is refused with ratelimit.ErrInvalid and
// ErrTooMany when 10,000 identity controls (maxControls) are
// already in force.
//
// Redis expires the record on its own clock, whatever Options.Now says: a
// stepped clock in the past sets records that are gone at once.
//
// The identity's tag and the control's end are then mirrored into the
// network-controls hash (field "i:<tag>"), which every instance's control
// watch reads at most once per Propagation: a decision of a
// Limiter with Options.Controls reads the control key only of identities
// its watch lists. The hash holds at most 1,000 such fields
// (ctlstore.MaxWatched): when they are all live and the identity has none, the control's end
// extends the one overflow field instead (to the later of the two ends;
// lifting never brings it earlier), and every instance that reads it
// reads every identity's control key until that end, so no control is
// missed and each read of the hash stays small. A new control therefore
// applies from the first
// decision after each instance's next read of the hash, at most
// Propagation (plus one read) after Set returns; a control
// replaced on an identity already listed applies from the next decision.
// A Gate's deny cache keeps a denial at most Propagation longer.
//
// The index and the hash are written before the record, so that a control
// in force is always listed and watched: a failure in between leaves an
// entry without a record, which List skips and decisions read as
// no control.
func (s *Store) Set(ctx context.Context, identity string, c Control) error {
	if identity == "" {
		return fmt.Errorf("set control: %w: no identity", errs.ErrInvalid)
	}
	ctx, cancel := s.adminContext(ctx)
	defer cancel()
	now, err := s.adminNow(ctx)
	if err != nil {
		return fmt.Errorf("set control: %w", err)
	}
	if err := c.Validate(now); err != nil {
		return fmt.Errorf("set control: %w", err)
	}
	c.SetAt = now
	tag := s.cfg().Keys.Tag(identity)
	endMs := ceilMilli(c.Until)
	vals, err := controlIndexSetScript.run(ctx, s.cfg().Client, 1, s.cfg().Keys.ControlIndexKey(),
		strconv.FormatInt(now.UnixMilli(), 10), tag, strconv.FormatInt(endMs, 10), strconv.Itoa(maxControls))
	if err != nil {
		return fmt.Errorf("set control: index: %w: %w", errs.ErrUnavailable, err)
	}
	if n, ok := firstInt(vals); !ok {
		return fmt.Errorf("set control: %w: index script replied %v", errs.ErrUnavailable, vals)
	} else if n < 0 {
		return fmt.Errorf("set control: %w: %w: %d identity controls are in force, the most allowed; lift some first", errs.ErrInvalid, ErrTooMany, maxControls)
	}
	vals, err = networkControlSetScript.run(ctx, s.cfg().Client, 1, s.cfg().Keys.NetworkControlsKey(),
		strconv.FormatInt(now.UnixMicro(), 10), ctlstore.IdentityField(tag), strconv.FormatInt(c.Until.UnixMicro(), 10),
		strconv.FormatInt(endMs, 10), strconv.Itoa(ctlstore.MaxWatched), ctlstore.OverflowField)
	if err != nil {
		return fmt.Errorf("set control: watch: %w: %w", errs.ErrUnavailable, err)
	}
	if n, ok := firstInt(vals); !ok || n < 0 {
		// The script never refuses an identity: past the bound it
		// writes the overflow field.
		return fmt.Errorf("set control: %w: watch script replied %v", errs.ErrUnavailable, vals)
	}
	err = s.cfg().Client.SetArgs(ctx, s.cfg().Keys.ControlKey(tag), formatRecord(c), redis.SetArgs{ExpireAt: time.UnixMilli(endMs)}).Err()
	if err != nil {
		return fmt.Errorf("set control: record: %w: %w", errs.ErrUnavailable, err)
	}
	return nil
}

// Lift deletes identity's control and returns it, with false when
// the identity had none (or its control had ended). A malformed record is
// deleted too, and returned as the zero Control with true. Decisions stop
// applying the control from their next script call on.
func (s *Store) Lift(ctx context.Context, identity string) (Control, bool, error) {
	if identity == "" {
		return Control{}, false, fmt.Errorf("lift control: %w: no identity", errs.ErrInvalid)
	}
	ctx, cancel := s.adminContext(ctx)
	defer cancel()
	tag := s.cfg().Keys.Tag(identity)
	rec, err := s.cfg().Client.GetDel(ctx, s.cfg().Keys.ControlKey(tag)).Result()
	if errors.Is(err, redis.Nil) {
		return Control{}, false, nil
	}
	if err != nil {
		return Control{}, false, fmt.Errorf("lift control: %w: %w", errs.ErrUnavailable, err)
	}
	c, perr := parseRecord(rec)
	if perr != nil {
		// A malformed record has no end to compare: its index and watch
		// entries go when their ends pass, and the listing skips it
		// meanwhile (decisions read its key: no record, no control).
		return Control{}, true, nil
	}
	_, err = controlIndexLiftScript.run(ctx, s.cfg().Client, 1, s.cfg().Keys.ControlIndexKey(),
		tag, strconv.FormatInt(ceilMilli(c.Until), 10))
	if err != nil {
		return c, true, fmt.Errorf("lift control: the control is lifted, its index entry left: %w: %w", errs.ErrUnavailable, err)
	}
	_, err = controlWatchLiftScript.run(ctx, s.cfg().Client, 1, s.cfg().Keys.NetworkControlsKey(),
		ctlstore.IdentityField(tag), strconv.FormatInt(c.Until.UnixMicro(), 10))
	if err != nil {
		return c, true, fmt.Errorf("lift control: the control is lifted, its watch entry left: %w: %w", errs.ErrUnavailable, err)
	}
	return c, true, nil
}

// Get returns identity's control in force, with false when it has
// none. A record that cannot be read is an error wrapping
// ErrMalformed (decisions ignore such a record).
func (s *Store) Get(ctx context.Context, identity string) (Control, bool, error) {
	if identity == "" {
		return Control{}, false, fmt.Errorf("get control: %w: no identity", errs.ErrInvalid)
	}
	ctx, cancel := s.adminContext(ctx)
	defer cancel()
	rec, err := s.cfg().Client.Get(ctx, s.cfg().Keys.ControlKey(s.cfg().Keys.Tag(identity))).Result()
	if errors.Is(err, redis.Nil) {
		return Control{}, false, nil
	}
	if err != nil {
		return Control{}, false, fmt.Errorf("get control: %w: %w", errs.ErrUnavailable, err)
	}
	c, err := parseRecord(rec)
	if err != nil {
		return Control{}, false, fmt.Errorf("get control: the identity's record is ignored by decisions: %w", err)
	}
	if s.cfg().Now != nil && !c.Until.After(s.cfg().Now()) {
		// Redis expires the record on its own clock; a stepped clock
		// may have passed the end first.
		return Control{}, false, nil
	}
	return c, true, nil
}

// List returns the identity controls in force, soonest end first
// (ties by tag): it reads the index and then every listed record, one GET
// each, pipelined (per node in a cluster, where records live in their
// identities' slots). Index entries whose end has passed, or whose record
// is gone (expired or lifted), are left out; a record that cannot be read
// is listed as Malformed.
func (s *Store) List(ctx context.Context) ([]Entry, error) {
	ctx, cancel := s.adminContext(ctx)
	defer cancel()
	now, err := s.adminNow(ctx)
	if err != nil {
		return nil, fmt.Errorf("list controls: %w", err)
	}
	tags, err := s.cfg().Client.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key: s.cfg().Keys.ControlIndexKey(), ByScore: true,
		Start: "(" + strconv.FormatInt(now.UnixMilli(), 10), Stop: "+inf",
		Count: maxControls,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("list controls: index: %w: %w", errs.ErrUnavailable, err)
	}
	const batch = 500
	entries := make([]Entry, 0, len(tags))
	for start := 0; start < len(tags); start += batch {
		part := tags[start:min(start+batch, len(tags))]
		cmds := make([]*redis.StringCmd, len(part))
		_, err := s.cfg().Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, tag := range part {
				cmds[i] = p.Get(ctx, s.cfg().Keys.ControlKey(tag))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("list controls: records: %w: %w", errs.ErrUnavailable, err)
		}
		for i, cmd := range cmds {
			rec, err := cmd.Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list controls: record: %w: %w", errs.ErrUnavailable, err)
			}
			c, perr := parseRecord(rec)
			if perr != nil {
				entries = append(entries, Entry{Tag: part[i], Malformed: true})
				continue
			}
			if !c.Until.After(now) {
				continue
			}
			entries = append(entries, Entry{Tag: part[i], Control: c})
		}
	}
	return entries, nil
}

// SetNetwork stores c, a block or an exemption, on every address of
// network, replacing any control the network had. network must be a valid
// IPv4 or IPv6 prefix with no host bits set (203.0.113.0/24, not
// 203.0.113.7/24), and not an IPv4-mapped IPv6 prefix (addresses are
// matched unmapped: write it as IPv4): a prefix that could be read as
// several networks is refused, not guessed at. c is validated and SetAt set
// as by Set. The record is a field of the one hash every instance
// reads; fields whose control has ended are removed on each write, and a
// new network is refused with ratelimit.ErrInvalid and ErrTooMany when
// MaxNetworks are in force.
//
// Instances see the change at their next read, at most
// Propagation later (NewNetworkControlCache).
func (s *Store) SetNetwork(ctx context.Context, network netip.Prefix, c Control) error {
	if err := checkNetwork(network); err != nil {
		return fmt.Errorf("set network control: %w", err)
	}
	if c.Kind != Block && c.Kind != Exempt {
		return fmt.Errorf("set network control: %w: a network takes a block or an exemption, not a %s", errs.ErrInvalid, c.Kind)
	}
	ctx, cancel := s.adminContext(ctx)
	defer cancel()
	now, err := s.adminNow(ctx)
	if err != nil {
		return fmt.Errorf("set network control: %w", err)
	}
	if err := c.Validate(now); err != nil {
		return fmt.Errorf("set network control: %w", err)
	}
	c.SetAt = now
	vals, err := networkControlSetScript.run(ctx, s.cfg().Client, 1, s.cfg().Keys.NetworkControlsKey(),
		strconv.FormatInt(now.UnixMicro(), 10), network.String(), formatRecord(c),
		strconv.FormatInt(ceilMilli(c.Until), 10), strconv.Itoa(MaxNetworks), ctlstore.OverflowField)
	if err != nil {
		return fmt.Errorf("set network control: %w: %w", errs.ErrUnavailable, err)
	}
	if n, ok := firstInt(vals); !ok {
		return fmt.Errorf("set network control: %w: script replied %v", errs.ErrUnavailable, vals)
	} else if n < 0 {
		return fmt.Errorf("set network control: %w: %w: %d network controls are in force, the most allowed; lift some first", errs.ErrInvalid, ErrTooMany, MaxNetworks)
	}
	return nil
}

// LiftNetwork deletes network's control and returns it, with false
// when it had none in force (an ended one is deleted all the same). A
// malformed record is deleted and returned as the zero Control with true.
func (s *Store) LiftNetwork(ctx context.Context, network netip.Prefix) (Control, bool, error) {
	if err := checkNetwork(network); err != nil {
		return Control{}, false, fmt.Errorf("lift network control: %w", err)
	}
	ctx, cancel := s.adminContext(ctx)
	defer cancel()
	now, err := s.adminNow(ctx)
	if err != nil {
		return Control{}, false, fmt.Errorf("lift network control: %w", err)
	}
	key, field := s.cfg().Keys.NetworkControlsKey(), network.String()
	var get *redis.StringCmd
	_, err = s.cfg().Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.HGet(ctx, key, field)
		p.HDel(ctx, key, field)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return Control{}, false, nil
	}
	if err != nil {
		return Control{}, false, fmt.Errorf("lift network control: %w: %w", errs.ErrUnavailable, err)
	}
	c, err := parseRecord(get.Val())
	if err != nil {
		return Control{}, true, nil
	}
	if !c.Until.After(now) {
		return Control{}, false, nil
	}
	return c, true, nil
}

// Networks reads every network control in force (one HGETALL, at
// Redis's time or Options.Now): blocks first, then exemptions, each by
// network. Fields that cannot be read (a network or a record not written
// by SetNetwork) are skipped; when there were any, the list comes
// with an error wrapping ErrMalformed that counts them. More than
// MaxNetworks in force keeps the blocks first, and says so with an
// error wrapping ErrTooMany. A failure to read is ratelimit.ErrUnavailable,
// with no list.
func (s *Store) Networks(ctx context.Context) ([]Network, error) {
	ctx, cancel := s.adminContext(ctx)
	defer cancel()
	now, err := s.adminNow(ctx)
	if err != nil {
		return nil, fmt.Errorf("network controls: %w", err)
	}
	st, err := s.cfg().Watch.Read(ctx, now)
	if err != nil {
		return nil, err
	}
	return keepNetworks(networksOf(st))
}

// networksOf reads the network controls of a read of the hash, as of its
// time: the controls in force, strictest first (blocks, then exemptions;
// then by network, for a deterministic order), and how many fields could
// not be read (the identity fields the watch could not read counted with
// them).
func networksOf(st *ctlstore.State) ([]Network, int) {
	list := make([]Network, 0, min(len(st.Fields), MaxNetworks+1))
	malformed := st.Malformed
	for field, rec := range st.Fields {
		if _, ok := ctlstore.IsIdentityField(field); ok {
			continue
		}
		p, err := netip.ParsePrefix(field)
		if err != nil || checkNetwork(p) != nil || p.String() != field {
			malformed++
			continue
		}
		c, err := parseRecord(rec)
		if err != nil || (c.Kind != Block && c.Kind != Exempt) {
			malformed++
			continue
		}
		if c.Until.After(st.ReadAt) {
			list = append(list, Network{Prefix: p, Control: c})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Control.Kind != b.Control.Kind {
			return a.Control.Kind == Block
		}
		if a.Prefix.Addr() != b.Prefix.Addr() {
			return a.Prefix.Addr().Less(b.Prefix.Addr())
		}
		return a.Prefix.Bits() < b.Prefix.Bits()
	})
	return list, malformed
}

// keepNetworks keeps the first MaxNetworks of list, and says what a read
// found: fields skipped, or more than MaxNetworks in force.
func keepNetworks(list []Network, malformed int) ([]Network, error) {
	var problems []error
	if malformed > 0 {
		problems = append(problems, fmt.Errorf("network controls: %w: %d field(s) skipped", ErrMalformed, malformed))
	}
	if len(list) > MaxNetworks {
		problems = append(problems, fmt.Errorf("network controls: %w: %d in force, the first %d kept, blocks first", ErrTooMany, len(list), MaxNetworks))
		list = list[:MaxNetworks:MaxNetworks]
	}
	return list, errors.Join(problems...)
}

// checkNetwork refuses a prefix a network control cannot be set on.
func checkNetwork(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("%w: not a network prefix", errs.ErrInvalid)
	case p.Addr().Zone() != "":
		return fmt.Errorf("%w: network %s has a zone", errs.ErrInvalid, p)
	case p.Addr().Is4In6():
		return fmt.Errorf("%w: network %s is IPv4-mapped IPv6; write it as IPv4 (addresses are matched unmapped)", errs.ErrInvalid, p)
	case p.Masked() != p:
		return fmt.Errorf("%w: network %s has host bits set: it would be %s; write the network's first address (or the prefix length meant)", errs.ErrInvalid, p, p.Masked())
	}
	return nil
}

// Tag is identity's hash tag, as its keys and Entry carry it.
func (s *Store) Tag(identity string) string { return s.cfg().Keys.Tag(identity) }

// Time is the time the Limiter's admin calls and decisions work at:
// Options.Now when set, else Redis's clock (TIME), which a control's end
// is compared with. A caller computing a control's end from a duration
// should start from it rather than from its own clock.
func (s *Store) Time(ctx context.Context) (time.Time, error) {
	ctx, cancel := s.adminContext(ctx)
	defer cancel()
	return s.adminNow(ctx)
}

// adminContext applies Options.Timeout to one admin call, as Reset does.
func (s *Store) adminContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.cfg().Timeout > 0 {
		return context.WithTimeout(ctx, s.cfg().Timeout)
	}
	return ctx, func() {}
}

// adminNow is the time an admin call works at: Options.Now, or Redis's
// clock, which the decisions' scripts compare the ends with.
func (s *Store) adminNow(ctx context.Context) (time.Time, error) {
	if s.cfg().Now != nil {
		return s.cfg().Now(), nil
	}
	t, err := s.cfg().Client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: redis time: %w", errs.ErrUnavailable, err)
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
