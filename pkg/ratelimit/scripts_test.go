package ratelimit

import (
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
		if got[i].sha != want[i].sha || got[i].src != want[i].src || got[i].name != want[i].name {
			t.Errorf("script %d: %s %s, want %s %s", i, got[i].name, got[i].sha, want[i].name, want[i].sha)
		}
		if other[i].sha != got[i].sha {
			t.Errorf("script %d: two limiters disagree: %s and %s", i, other[i].sha, got[i].sha)
		}
	}
	if &a.scripts.controlled()[0] != &b.scripts.controlled()[0] {
		t.Error("two limiters built the controlled scripts twice")
	}
	for i := range plain.scripts.all() {
		if plain.scripts.all()[i].sha != got[i].sha {
			t.Errorf("script %d differs between a Limiter with controls and one without", i)
		}
	}
}
