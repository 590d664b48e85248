package httplimit_test

import (
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// A whole service: 100 requests per minute per client address, 429 with
// the rate-limit headers beyond it, the local limit while Redis is down.
func ExampleLimit() {
	gate, err := ratelimit.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("hello\n"))
	})
	limited := httplimit.Limit(gate, ratelimit.PerMinute(100), httplimit.Options{})
	log.Fatal(http.ListenAndServe(":8080", limited(mux)))
}
