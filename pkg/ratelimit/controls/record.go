package controls

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/ctlstore"
)

// formatRecord is c's record (ctlstore.Record). c must be valid.
func formatRecord(c Control) string {
	r := ctlstore.Record{Kind: 'b', Until: c.Until.UnixMicro(), Reason: c.Reason, By: c.SetBy, At: c.SetAt.UnixMilli()}
	switch c.Kind {
	case Exempt:
		r.Kind = 'e'
	case Scale:
		r.Kind, r.Milli = 's', int64(math.Round(c.Factor*1000))
	}
	return ctlstore.FormatRecord(r)
}

// parseRecord reads a record formatRecord wrote, as the decision scripts
// read it; its errors wrap ErrMalformed.
func parseRecord(s string) (Control, error) {
	r, err := ctlstore.ParseRecord(s)
	if err != nil {
		return Control{}, err
	}
	c := Control{Kind: Block, Until: time.UnixMicro(r.Until), Reason: r.Reason, SetBy: r.By, SetAt: time.UnixMilli(r.At)}
	switch r.Kind {
	case 'e':
		c.Kind = Exempt
	case 's':
		c.Kind, c.Factor = Scale, float64(r.Milli)/1000
	}
	return c, nil
}

// The admin scripts: they touch the index and the network hash, never a
// decision's keys, and are not preloaded (EVALSHA falls back to EVAL).
//
//go:embed lua/*.lua
var luaFiles embed.FS

var (
	controlIndexSetScript   = mustScript("control_index_set.lua")
	controlIndexLiftScript  = mustScript("control_index_lift.lua")
	networkControlSetScript = mustScript("network_controls_set.lua")
	controlWatchLiftScript  = mustScript("control_watch_lift.lua")
)

// script is one admin script, as sent to Redis.
type script struct{ name, src, sha string }

func mustScript(file string) script {
	src, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		// The files are embedded at build time; a missing one is a build bug.
		panic(fmt.Sprintf("controls: embedded script %s: %v", file, err))
	}
	sum := sha1.Sum(src)
	return script{name: file, src: string(src), sha: hex.EncodeToString(sum[:])}
}

// run executes the script with EVALSHA, then EVAL when the node does not
// have it (NOSCRIPT). The admin scripts are idempotent: a retry after a
// lost reply writes the same. args is the whole command after the verb and
// the script: the key count, KEYS and ARGV.
func (sc script) run(ctx context.Context, c ctlstore.Client, args ...any) ([]any, error) {
	res, err := sc.call(ctx, c, "evalsha", sc.sha, args)
	if err != nil && isNoScript(err) {
		res, err = sc.call(ctx, c, "eval", sc.src, args)
	}
	if err != nil {
		return nil, fmt.Errorf("run script %s: %w", sc.name, err)
	}
	vals, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("run script %s: unexpected reply %T", sc.name, res)
	}
	return vals, nil
}

func (sc script) call(ctx context.Context, c ctlstore.Client, verb, script string, args []any) (any, error) {
	cmd := redis.NewCmd(ctx, append([]any{verb, script}, args...)...)
	// Process's own error is the command's error, read below.
	_ = c.Process(ctx, cmd)
	return cmd.Result()
}

func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
