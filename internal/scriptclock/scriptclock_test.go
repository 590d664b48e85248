package scriptclock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestUnwrap(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

	inner, now := Unwrap(Wrap(client, func() time.Time { return at }))
	if inner != client || now == nil || !now().Equal(at) {
		t.Fatalf("Unwrap(Wrap(c, now)) = %v and clock %v; want c and the clock", inner, now != nil)
	}
	if inner, now := Unwrap(client); inner != client || now != nil {
		t.Fatalf("Unwrap(c) = %v, non-nil clock %v; want c and Redis's clock", inner, now != nil)
	}
}
