package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// TestControlledRepliesAreDecodedOrRefused pins down the reply format of
// the controlled scripts (lua/mixed.lua): the decision's reply alone,
// with the control appended, or a block's; anything else is an
// ErrUnavailable error, never a panic.
func TestControlledRepliesAreDecodedOrRefused(t *testing.T) {
	now := controlsT0.UnixMicro()
	until := controlsT0.Add(time.Minute).UnixMicro()
	checks := []Check{{Identity: "a", Limit: Limit{Name: "u", Count: 3, Window: time.Minute}}}
	g := group{algorithm: SlidingWindow, indexes: []int{0}}
	cases := []struct {
		name    string
		reply   []any
		allowed bool
		kind    controls.Kind
		bad     bool
	}{
		{"no record", []any{int64(1), now, int64(0)}, true, controls.None, false},
		{"block", []any{int64(0), now, []any{int64(1), until, int64(0)}}, false, controls.Block, false},
		{"exempt", []any{int64(1), now, int64(-4), []any{int64(2), until, int64(0)}}, true, controls.Exempt, false},
		{"scale", []any{int64(1), now, int64(5), []any{int64(3), until, int64(2000)}}, true, controls.Scale, false},
		{"malformed record", []any{int64(1), now, int64(0), []any{int64(0), int64(0), int64(0)}}, true, controls.None, false},
		{"block with a decision", []any{int64(0), now, int64(0), []any{int64(1), until, int64(0)}}, false, 0, true},
		{"exempt without one", []any{int64(1), now, []any{int64(2), until, int64(0)}}, false, 0, true},
		{"unknown kind", []any{int64(1), now, int64(0), []any{int64(9), until, int64(0)}}, false, 0, true},
		{"scale of 0", []any{int64(1), now, int64(0), []any{int64(3), until, int64(0)}}, false, 0, true},
		{"short control", []any{int64(1), now, int64(0), []any{int64(2), until}}, false, 0, true},
		{"control not integers", []any{int64(1), now, int64(0), []any{"2", until, int64(0)}}, false, 0, true},
		{"control not an array", []any{int64(1), now, int64(0), int64(2)}, false, 0, true},
		{"too long", []any{int64(1), now, int64(0), int64(0), int64(0)}, false, 0, true},
		{"block's now not an integer", []any{int64(0), "now", []any{int64(1), until, int64(0)}}, false, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]Decision, 1)
			body, ctl, err := splitControl(tc.reply, groupReplyLen(g))
			var ok bool
			var applied controls.Applied
			if err == nil {
				ok, applied, err = controlledDecisions(body, ctl, 1, true, checks, []group{g}, out)
			}
			if tc.bad {
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("err = %v, want ErrUnavailable", err)
				}
				return
			}
			if err != nil || ok != tc.allowed || applied.Kind != tc.kind {
				t.Fatalf("allowed %v, control %+v, err %v; want %v, %v", ok, applied, err, tc.allowed, tc.kind)
			}
			if tc.kind == controls.Scale && (out[0].Limit.Count != 6 || applied.Factor != 2) {
				t.Fatalf("scaled decision %+v, control %+v", out[0], applied)
			}
			if tc.kind == controls.Exempt && (!out[0].Allowed || out[0].Remaining != 0) {
				t.Fatalf("exempt decision %+v: want allowed with the honest 0 remaining", out[0])
			}
		})
	}
}

func TestScaledLimitKeepsCountTimesWindowExact(t *testing.T) {
	cases := []struct {
		l     Limit
		milli int64
		want  int64
	}{
		{Limit{Count: 3, Window: time.Minute}, 10_000, 30},
		{Limit{Count: 35, Window: time.Minute}, 100, 3},
		{Limit{Count: 5, Window: time.Minute}, 1, 1},
		{Limit{Count: 999_999, Window: time.Second}, 1_000_000, MaxCount},
		// 10,000/366d x10 would pass 2^50 in ms: capped at the bound.
		{Limit{Count: 10_000, Window: 366 * 24 * time.Hour}, 10_000, maxCountWindow / (366 * 24 * time.Hour).Milliseconds()},
		{Limit{Count: 10_000, Window: 24 * time.Hour, Algorithm: TokenBucket}, 10_000, maxCountWindow / (24 * time.Hour).Microseconds()},
		{Limit{Count: 10_000, Window: 366 * 24 * time.Hour, Algorithm: FixedWindow}, 10_000, 100_000},
	}
	for _, tc := range cases {
		got := scaledLimit(tc.l, tc.milli)
		if got.Count != tc.want {
			t.Errorf("%v %s x%d‰ = %d, want %d", tc.l, tc.l.Algorithm.orDefault(), tc.milli, got.Count, tc.want)
		}
		if got.Validate() != nil {
			t.Errorf("%v x%d‰ = %v: %v", tc.l, tc.milli, got, got.Validate())
		}
	}
}

func TestStrictestControlIsReported(t *testing.T) {
	at := func(m int) time.Time { return controlsT0.Add(time.Duration(m) * time.Minute) }
	b1, b2 := controls.Applied{Kind: controls.Block, Until: at(1)}, controls.Applied{Kind: controls.Block, Until: at(2)}
	s2, s5 := controls.Applied{Kind: controls.Scale, Factor: 2, Until: at(9)}, controls.Applied{Kind: controls.Scale, Factor: 0.5, Until: at(1)}
	e := controls.Applied{Kind: controls.Exempt, Until: at(5)}
	bad := controls.Applied{Malformed: true}
	cases := []struct {
		a, b, want controls.Applied
	}{
		{controls.Applied{}, e, e},
		{e, s2, s2},
		{s2, s5, s5},
		{s5, b1, b1},
		{b2, b1, b2},
		{b1, b2, b2},
		{bad, e, controls.Applied{Kind: controls.Exempt, Until: at(5), Malformed: true}},
	}
	for _, tc := range cases {
		if got := strictestControl(tc.a, tc.b); got != tc.want {
			t.Errorf("strictest(%+v, %+v) = %+v, want %+v", tc.a, tc.b, got, tc.want)
		}
	}
}

// FuzzControlReply feeds controlled scripts' replies, as a broken or
// hostile server could send them, to their decoder: an answer or an
// error, never a panic.
func FuzzControlReply(f *testing.F) {
	f.Add(int64(1), int64(0), int64(3), int64(0), int64(2000), uint8(4))
	f.Add(int64(0), int64(1), int64(1), int64(-5), int64(0), uint8(3))
	f.Add(int64(1), int64(-1<<63), int64(2), int64(1<<62), int64(1), uint8(5))
	f.Fuzz(func(t *testing.T, allowed, v, kind, until, milli int64, shape uint8) {
		checks := []Check{
			{Identity: "a", Limit: Limit{Name: "u", Count: 3, Window: time.Minute}},
			{Identity: "a", Limit: Limit{Name: "r", Count: 2, Window: time.Second, Algorithm: TokenBucket}},
		}
		ctl := []any{kind, until, milli}
		var reply []any
		var groups []group
		switch shape % 4 {
		case 0:
			groups = []group{{algorithm: SlidingWindow, indexes: []int{0}}}
			reply = []any{allowed, v, v, ctl}
		case 1:
			groups = []group{{algorithm: TokenBucket, indexes: []int{1}}}
			reply = []any{allowed, v, allowed, v, v, v, ctl}
		case 2:
			groups = []group{{algorithm: SlidingWindow, indexes: []int{0}}, {algorithm: TokenBucket, indexes: []int{1}}}
			reply = []any{allowed, v, allowed, v, v, allowed, v, allowed, v, v, v, ctl}
		default:
			groups = []group{{algorithm: SlidingWindow, indexes: []int{0}}}
			reply = []any{allowed, v, ctl}
		}
		reply = reply[:min(len(reply), int(shape/4)%len(reply)+1+len(reply)/2)]
		want := mixedReplyLen(groups)
		if len(groups) == 1 {
			want = groupReplyLen(groups[0])
		}
		out := make([]Decision, len(checks))
		body, c, err := splitControl(reply, want)
		if err != nil {
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("error %v does not wrap ErrUnavailable", err)
			}
			return
		}
		if _, _, err := controlledDecisions(body, c, 1, true, checks, groups, out); err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("error %v does not wrap ErrUnavailable", err)
		}
	})
}

// FuzzControlRecordAgreement runs parseControlRecord and the decision
// script (a real redis-server) over the same record: the script ignores,
// as malformed, exactly what parseControlRecord refuses, and applies a
// record it reads as parseControlRecord reads it. The first four fields
// are fuzzed; the metadata is one of a set that both readers agree on.
func FuzzControlRecordAgreement(f *testing.F) {
	f.Add("v1 b 1900000000000000 0 ", uint8(0))
	f.Add("v1 s 1900000000000000 1500 ", uint8(1))
	f.Add("v1 e 17 0 ", uint8(2))
	f.Add("v1 s 1900000000000000 0 ", uint8(3))
	f.Add("v1 b 0001900000000000000 0 ", uint8(4))
	metas := []string{`{}`, `null`, ` {"reason":"x","by":"y","at":12}`, `{"reason":5}`, `not json`, `[1]`, `[]`, `{"at":1.5}`, `7`, ``}
	server := redistest.StartServer(f)
	client := server.Client(f)
	l := loadedLimiter(f, client, Options{KeyPrefix: "fuzz-ctl", Controls: true, Now: func() time.Time { return controlsT0 }})
	ctx := context.Background()
	n := 0
	f.Fuzz(func(t *testing.T, head string, meta uint8) {
		if fields := strings.SplitN(head, " ", 5); len(fields) == 5 && fields[4] != "" {
			return // the metadata comes from metas only
		}
		rec := head + metas[int(meta)%len(metas)]
		n++
		id := fmt.Sprint("fuzz-", n)
		if err := client.Set(ctx, l.keys.controlKey(l.keys.identityTag(id)), rec, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		watchIdentity(t, client, l, id)
		res, err := l.Decide(ctx, 1, Check{Identity: id, Limit: Limit{Name: "u", Count: 1000, Window: time.Minute}})
		if err != nil {
			t.Fatalf("record %q: %v", rec, err)
		}
		c, perr := parseControlRecord(rec)
		if res.Control.Malformed != (perr != nil) {
			t.Fatalf("record %q: parseControlRecord says %v, the script's Malformed %v", rec, perr, res.Control.Malformed)
		}
		if perr != nil {
			return
		}
		inForce := c.Until.After(controlsT0)
		switch {
		case !inForce && res.Control.Kind != controls.None:
			t.Fatalf("record %q ended at %v, applied as %+v", rec, c.Until, res.Control)
		case inForce && (res.Control.Kind != c.Kind || !res.Control.Until.Equal(c.Until) || res.Control.Factor != c.Factor):
			if c.Until.UnixMicro() < 1<<53 {
				t.Fatalf("record %q read as %+v, applied as %+v", rec, c, res.Control)
			}
		}
	})
}
