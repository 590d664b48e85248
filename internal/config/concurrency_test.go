package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/internal/truncate"
)

func TestParseConcurrency(t *testing.T) {
	c, err := ParseConcurrency(" anonymous=2, org=50 ,Pro=20,POST /v1/export/*=1,ANY:/slow=3")
	if err != nil {
		t.Fatal(err)
	}
	if c.Owners["anonymous"] != 2 || c.Owners["org"] != 50 || c.Owners["pro"] != 20 || len(c.Owners) != 3 {
		t.Fatalf("owners %v", c.Owners)
	}
	if len(c.Routes) != 2 || c.Routes[0].Name() != "POST /v1/export/*" || c.Routes[0].Max != 1 || c.Routes[1].Method != "*" {
		t.Fatalf("routes %+v", c.Routes)
	}
	for _, none := range []string{"", " none ", "NONE"} {
		if c, err := ParseConcurrency(none); err != nil || !c.Empty() {
			t.Fatalf("%q: %+v, %v; want nothing limited", none, c, err)
		}
	}
	for _, bad := range []string{
		"anonymous", "anonymous=0", "anonymous=-1", "anonymous=1.5", "anonymous=100001",
		"anonymous=2,anonymous=3", "unlimited=2", "quota=1", "b@d=1", "POST auth=1", "FOO! /x=1",
		"anonymous=2,org=", strings.Repeat("anonymous=1,", MaxConcurrencyEntries+1),
	} {
		if _, err := ParseConcurrency(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	// One name is one Redis key: a second entry of it would take a second
	// slot of the same set per request.
	for _, dup := range []string{"anonymous=2,anonymous=3", "Pro=1,pro=2", "GET /x=1,GET /x=2", "GET /x=1,get:/x=1", "ANY /x=1,* /x=2"} {
		if c, err := ParseConcurrency(dup); !errors.Is(err, ErrDuplicateEntry) || !c.Empty() {
			t.Errorf("%q: %+v, %v; want it refused whole as a duplicate", dup, c, err)
		}
	}
}

func TestConcurrencyFromEnvAndStage(t *testing.T) {
	env := map[string]string{"RATE_LIMIT_CONCURRENCY": "anonymous=2,org=50", "RATE_LIMIT_CONCURRENCY_LEASE": "45s"}
	cfg, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Concurrency.Owners["anonymous"] != 2 || cfg.ConcurrencyLease != 45*time.Second {
		t.Fatalf("config %+v lease %v", cfg.Concurrency, cfg.ConcurrencyLease)
	}
	stages := NewStageCache(cfg, nil)
	if got := stages.For(nil).Concurrency.Owners["org"]; got != 50 {
		t.Fatalf("environment's org = %d", got)
	}
	if got := stages.For(map[string]string{StageVarConcurrency: "org=5"}).Concurrency.Owners; got["org"] != 5 || len(got) != 1 {
		t.Fatalf("stage's = %v, want org=5 only", got)
	}
	var reported []error
	stages = NewStageCache(cfg, func(err error) { reported = append(reported, err) })
	if got := stages.For(map[string]string{StageVarConcurrency: "org=zero"}).Concurrency.Owners; got["anonymous"] != 2 {
		t.Fatalf("a bad stage value: %v, want the environment's", got)
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), StageVarConcurrency) {
		t.Fatalf("reported %v", reported)
	}

	env = map[string]string{"RATE_LIMIT_CONCURRENCY": "anonymous=x", "RATE_LIMIT_CONCURRENCY_LEASE": "10ms"}
	cfg, err = FromEnv(func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "RATE_LIMIT_CONCURRENCY=") || !strings.Contains(err.Error(), "RATE_LIMIT_CONCURRENCY_LEASE=") {
		t.Fatalf("bad values: %v", err)
	}
	if !cfg.Concurrency.Empty() || cfg.ConcurrencyLease != 0 {
		t.Fatalf("bad values gave %+v, lease %v", cfg.Concurrency, cfg.ConcurrencyLease)
	}
}

// formatConcurrency writes c back as RATE_LIMIT_CONCURRENCY: every owner
// (sorted), then every route in order, as "METHOD /glob=N".
func formatConcurrency(c Concurrency) string {
	var entries []string
	for _, owner := range slices.Sorted(maps.Keys(c.Owners)) {
		entries = append(entries, owner+"="+strconv.FormatInt(c.Owners[owner], 10))
	}
	for _, r := range c.Routes {
		entries = append(entries, r.Name()+"="+strconv.FormatInt(r.Max, 10))
	}
	return strings.Join(entries, ",")
}

// FuzzConcurrency: RATE_LIMIT_CONCURRENCY, its stage variable and
// RATE_LIMIT_CONCURRENCY_LEASE never panic; the same value always gets
// the same answer, error text included; an accepted value holds only
// usable limits (each from 1 to MaxConcurrency, a tier or a plan name, a
// route of an upper-case method or *, every limit's name once: it is part
// of its Redis key), and writes back to a value that parses to the same
// limits; a refused one quotes no more than a clipped part of it; a
// refused stage variable leaves the environment's limits in place.
func FuzzConcurrency(f *testing.F) {
	for _, s := range []string{
		"anonymous=2,org=50,pro=20,POST /v1/export=1", "ANY:/slow=3", "GET:/a:/b=1", "get /x/*=2,ANY /**=1",
		"", "none", " NONE ", ",", "=", "anonymous", "anonymous=0", "anonymous=100001", "anonymous=+1", "anonymous=0x10",
		"anonymous=2,anonymous=3", "Pro=1,pro=2", "GET /x=1,GET /x=2", "GET /x=1,get:/x=1", "ANY /x=1,* /x=2",
		"unlimited=1", "quota=1", "POST auth=1", "FOO! /x=1", "GET /a b=1", "GET  /a=1", "\x00=1", "GET /\xff=1",
		strings.Repeat("anonymous=1,", MaxConcurrencyEntries+1),
	} {
		f.Add(s, "30s")
	}
	for _, lease := range []string{"", "1s", "1h", "999ms", "1h0m0.001s", "1.5s", "1500us", "-1s", "x", "9223372036s"} {
		f.Add("anonymous=1", lease)
	}
	env := Concurrency{Owners: map[string]int64{"org": 7}}
	f.Fuzz(func(t *testing.T, spec, lease string) {
		c, err := ParseConcurrency(spec)
		again, errAgain := ParseConcurrency(spec)
		if fmt.Sprint(err) != fmt.Sprint(errAgain) || !reflect.DeepEqual(c, again) {
			t.Fatalf("ParseConcurrency(%q) answered %+v, %v then %+v, %v", spec, c, err, again, errAgain)
		}
		staged, stageErr := stageConcurrency(spec, env)
		if err != nil {
			if !c.Empty() {
				t.Fatalf("ParseConcurrency(%q) refused (%v) but returned limits %+v", spec, err, c)
			}
			// The entry and a part of it are quoted, each clipped to
			// truncate.QuotedLen bytes that %q writes as up to 4 each.
			if n := len(err.Error()); n > 2*4*truncate.QuotedLen+256 {
				t.Fatalf("ParseConcurrency(%q): an error of %d bytes quotes too much: %v", spec, n, err)
			}
			if spec != "" && (stageErr == nil || !reflect.DeepEqual(staged, env)) {
				t.Fatalf("stage variable %q refused by ParseConcurrency: got %+v, %v; want the environment's limits and an error", spec, staged, stageErr)
			}
		} else {
			if stageErr != nil || (spec != "" && !reflect.DeepEqual(staged, c)) {
				t.Fatalf("stage variable %q: %+v, %v; want %+v", spec, staged, stageErr, c)
			}
			names := map[string]bool{}
			for owner, n := range c.Owners {
				if n < 1 || n > MaxConcurrency {
					t.Fatalf("ParseConcurrency(%q): %s=%d out of range", spec, owner, n)
				}
				if name, err := concurrencyOwner(owner); err != nil || name != owner {
					t.Fatalf("ParseConcurrency(%q): owner %q is not a normalised tier or plan (%q, %v)", spec, owner, name, err)
				}
				names[owner] = true
			}
			for _, r := range c.Routes {
				if r.Max < 1 || r.Max > MaxConcurrency {
					t.Fatalf("ParseConcurrency(%q): %s=%d out of range", spec, r.Name(), r.Max)
				}
				if again, err := route.Parse(r.Name()); err != nil || again.Method != r.Method || !strings.HasPrefix(r.Path.Text, "/") {
					t.Fatalf("ParseConcurrency(%q): route %q", spec, r.Name())
				}
				if names[r.Name()] {
					t.Fatalf("ParseConcurrency(%q): %s given twice: two limits on one key", spec, r.Name())
				}
				names[r.Name()] = true
			}
			if len(names) > MaxConcurrencyEntries {
				t.Fatalf("ParseConcurrency(%q): %d limits, more than %d", spec, len(names), MaxConcurrencyEntries)
			}
			written := formatConcurrency(c)
			back, err := ParseConcurrency(written)
			if err != nil {
				t.Fatalf("ParseConcurrency(%q) = %+v, written %q, which is refused: %v", spec, c, written, err)
			}
			if c.Empty() != back.Empty() || !c.Empty() && !reflect.DeepEqual(c, back) {
				t.Fatalf("ParseConcurrency(%q) = %+v, written %q, read back as %+v", spec, c, written, back)
			}
		}

		d, err := parseConcurrencyLease(lease)
		d2, err2 := parseConcurrencyLease(lease)
		if d != d2 || fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("parseConcurrencyLease(%q) answered %v, %v then %v, %v", lease, d, err, d2, err2)
		}
		switch {
		case err != nil:
			if d != 0 || !strings.Contains(err.Error(), "RATE_LIMIT_CONCURRENCY_LEASE=") {
				t.Fatalf("parseConcurrencyLease(%q) refused with %v, %v; want 0 and an error naming the variable", lease, d, err)
			}
		case lease == "":
			if d != 0 {
				t.Fatalf("parseConcurrencyLease(\"\") = %v, want 0 (the invocation's deadline)", d)
			}
		case d < MinConcurrencyLease || d > MaxConcurrencyLease || d%time.Millisecond != 0:
			t.Fatalf("parseConcurrencyLease(%q) = %v, outside %v..%v or not whole milliseconds", lease, d, MinConcurrencyLease, MaxConcurrencyLease)
		}
	})
}
