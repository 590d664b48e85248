package config

import (
	"strings"
	"testing"
	"time"
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
