package testkit_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := testkit.NewClock(start)
	steps := []struct {
		name string
		move func()
		want time.Time
	}{
		{"untouched", func() {}, start},
		{"advance", func() { c.Advance(time.Second) }, start.Add(time.Second)},
		{"back", func() { c.Advance(-time.Millisecond) }, start.Add(time.Second - time.Millisecond)},
		{"set", func() { c.Set(start) }, start},
	}
	for _, s := range steps {
		s.move()
		if got := c.Now(); !got.Equal(s.want) {
			t.Fatalf("%s: Now() = %s, want %s", s.name, got, s.want)
		}
	}
}

func TestClockAndBufferConcurrentUse(t *testing.T) {
	c := testkit.NewClock(time.Unix(0, 0))
	var b testkit.Buffer
	const workers, each = 8, 100
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				c.Advance(time.Millisecond)
				_ = c.Now()
				fmt.Fprintf(&b, "%d-%d\n", w, i)
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), time.Unix(0, 0).Add(workers*each*time.Millisecond); !got.Equal(want) {
		t.Errorf("Now() = %s, want %s", got, want)
	}
	if got := strings.Count(b.String(), "\n"); got != workers*each {
		t.Errorf("buffer holds %d lines, want %d", got, workers*each)
	}
}
