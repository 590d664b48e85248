package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/config"
)

// TestDuplicateEntriesRefused: one method and glob twice is an error
// naming the entry; each route limit is kept once (a copy would be two
// checks on one key), every cost kept (the highest applies).
func TestDuplicateEntriesRefused(t *testing.T) {
	routes, err := config.ParseRoutes("GET /v1/items=10/1m:fixed-window,POST /auth/*=5/1m,GET /v1//items/=10/1m:fixed-window,100/1d", "")
	if !errors.Is(err, config.ErrDuplicateEntry) || !strings.Contains(err.Error(), "GET /v1//items/=10/1m") {
		t.Fatalf("error %v, want a duplicate naming the entry", err)
	}
	var names []string
	for _, r := range routes {
		for _, l := range r.Limits {
			names = append(names, l.Name+" "+l.Limit.String())
		}
	}
	// The second entry's 10/1m is named "GET /v1//items/-1m": another key,
	// kept; only an identical limit would be dropped.
	if want := "GET /v1/items 10/1m|POST /auth/* 5/1m|GET /v1//items/-1m 10/1m|GET /v1//items/-1d 100/24h"; strings.Join(names, "|") != want {
		t.Errorf("routes %s, want %s", strings.Join(names, "|"), want)
	}
	routes, err = config.ParseRoutes("GET /v1/items=10/1m,GET /v1/items=10/1m", "")
	if !errors.Is(err, config.ErrDuplicateEntry) || len(routes) != 1 || len(routes[0].Limits) != 1 {
		t.Errorf("an exact copy: routes %+v, %v; want one route, one limit", routes, err)
	}
	cfg, err := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_ROUTES": "GET /v1/items=10/1m,GET /v1/items=10/1m"}))
	if err == nil || !strings.Contains(err.Error(), "RATE_LIMIT_ROUTES") || len(cfg.Routes) != 1 || cfg.Routes[0].Name() != "GET /v1/items" {
		t.Errorf("RATE_LIMIT_ROUTES with a copy: %v, routes %+v", err, cfg.Routes)
	}
	cfg, err = config.FromEnv(envOf(map[string]string{"RATE_LIMIT_COSTS": "GET /v1/items=2,get /v1/items=3"}))
	if err == nil || !strings.Contains(err.Error(), "RATE_LIMIT_COSTS") || len(cfg.Costs) != 2 {
		t.Errorf("RATE_LIMIT_COSTS with a copy: %v, costs %v", err, cfg.Costs)
	}
}
