package ratelimit

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Every Limiter of a process shares one set of scripts, the controlled
// ones included, and the shared set is the one the embedded files make.
func TestLimitersShareTheirScripts(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"}) // never dialled
	defer client.Close()
	a, err := NewLimiter(client, Options{Controls: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLimiter(client, Options{Controls: true, KeyPrefix: "other"})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewLimiter(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.scripts.controlled != nil {
		t.Error("a Limiter without controls has controlled scripts")
	}
	fresh := newScriptSet(true)
	want, got, other := fresh.all(), a.scripts.all(), b.scripts.all()
	if len(got) != len(want) || len(other) != len(want) {
		t.Fatalf("%d and %d scripts, want %d", len(got), len(other), len(want))
	}
	for i := range want {
		if got[i].sha() != want[i].sha() || got[i].src() != want[i].src() || got[i].name != want[i].name {
			t.Errorf("script %d: %s %s, want %s %s", i, got[i].name, got[i].sha(), want[i].name, want[i].sha())
		}
		if other[i].sha() != got[i].sha() {
			t.Errorf("script %d: two limiters disagree: %s and %s", i, other[i].sha(), got[i].sha())
		}
	}
	if a.scripts.controlled != b.scripts.controlled {
		t.Error("two limiters built the controlled scripts twice")
	}
	for i := range plain.scripts.all() {
		if plain.scripts.all()[i].sha() != got[i].sha() {
			t.Errorf("script %d differs between a Limiter with controls and one without", i)
		}
	}
}

// A script is composed and hashed on its first use, not when the set is
// made: NewLimiter, at a function's cold start, composes nothing, and a
// decision composes its own script alone.
func TestScriptsAreComposedOnFirstUse(t *testing.T) {
	set := newScriptSet(true)
	composed := func() []string {
		var names []string
		for _, sc := range set.all() {
			if sc.text != "" {
				names = append(names, sc.name)
			}
		}
		return names
	}
	if got := composed(); len(got) != 0 {
		t.Fatalf("a new set has composed %v", got)
	}
	sw := set.forAlgorithm(SlidingWindow)
	if sw.sha() == "" || !strings.Contains(sw.src(), "INCRBY") {
		t.Fatalf("sliding window script: sha %q, %d bytes", sw.sha(), len(sw.src()))
	}
	if got := composed(); len(got) != 1 || got[0] != "sliding_window.lua" {
		t.Errorf("after one sliding-window script: composed %v, want only sliding_window.lua", got)
	}
	// Its SHA-1 is the source's, as Redis computes it.
	if sum := sha1.Sum([]byte(sw.src())); hex.EncodeToString(sum[:]) != sw.sha() {
		t.Errorf("sha %s is not the SHA-1 of the source", sw.sha())
	}
}

// Concurrent first uses of one script compose it once and agree.
func TestScriptFirstUseIsSafeConcurrently(t *testing.T) {
	calls := 0
	sc := lazyScript("t.lua", func() string { calls++; return "return 1" })
	var wg sync.WaitGroup
	shas := make([]string, 8)
	for i := range shas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shas[i] = sc.sha()
		}()
	}
	wg.Wait()
	for _, s := range shas {
		if s != "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" {
			t.Fatalf("sha %s, want Redis's SHA-1 of %q", s, "return 1")
		}
	}
	if calls != 1 {
		t.Errorf("composed %d times, want once", calls)
	}
}

// TestScriptsAsSent: every script a process can load (issue 38: at most
// 12 of them, each at most 12 KB, 12,288 bytes, as sent to Redis) is sent
// without comment lines, blank lines or indentation, and holds each
// algorithm's file at most once.
func TestScriptsAsSent(t *testing.T) {
	const maxScripts, maxBytes = 12, 12 << 10
	set := newScriptSet(true)
	all := set.all()
	if len(all) > maxScripts {
		t.Errorf("%d scripts loadable, want at most %d", len(all), maxScripts)
	}
	for _, sc := range all {
		src := sc.src()
		if len(src) > maxBytes {
			t.Errorf("%s is %d bytes as sent, want at most %d", sc.name, len(src), maxBytes)
		}
		for _, file := range mixedFiles[1:] {
			if n := strings.Count(src, mustReadScript(file)); n > 1 {
				t.Errorf("%s holds %s %d times", sc.name, file, n)
			}
		}
		for line := range strings.SplitSeq(src, "\n") {
			if strings.HasPrefix(line, "--") || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
				t.Errorf("%s sends the line %q", sc.name, line)
				break
			}
		}
	}
}
