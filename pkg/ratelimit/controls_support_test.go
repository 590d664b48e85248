package ratelimit

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
	"github.com/slidegate/slidegate/pkg/ratelimit/internal/ctlstore"
)

// What the decisions' tests of live controls use of the controls' record
// and watch (internal/ctlstore), in this package's former names.

// maxWatchedControls is ctlstore.MaxWatched.
const maxWatchedControls = ctlstore.MaxWatched

// overflowField is ctlstore.OverflowField.
const overflowField = ctlstore.OverflowField

// identityField is ctlstore.IdentityField.
func identityField(tag string) string { return ctlstore.IdentityField(tag) }

// watchReport is the Limiter's watch's report.
func (l *Limiter) watchReport() ctlstore.Report { return l.watch.Report() }

// formatControlRecord is c's record, as controls.Store writes it.
func formatControlRecord(c controls.Control) string {
	r := ctlstore.Record{Kind: 'b', Until: c.Until.UnixMicro(), Reason: c.Reason, By: c.SetBy, At: c.SetAt.UnixMilli()}
	switch c.Kind {
	case controls.Exempt:
		r.Kind = 'e'
	case controls.Scale:
		r.Kind, r.Milli = 's', int64(math.Round(c.Factor*1000))
	}
	return ctlstore.FormatRecord(r)
}

// parseControlRecord reads a record as controls.Store reads it.
func parseControlRecord(s string) (controls.Control, error) {
	r, err := ctlstore.ParseRecord(s)
	if err != nil {
		return controls.Control{}, err
	}
	c := controls.Control{Kind: controls.Block, Until: time.UnixMicro(r.Until), Reason: r.Reason, SetBy: r.By, SetAt: time.UnixMilli(r.At)}
	switch r.Kind {
	case 'e':
		c.Kind = controls.Exempt
	case 's':
		c.Kind, c.Factor = controls.Scale, float64(r.Milli)/1000
	}
	return c, nil
}

// redisNow is the server's clock: the controls' ends are on it.
func redisNow(t *testing.T, client redis.UniversalClient) time.Time {
	t.Helper()
	now, err := client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}
