package controls

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/errs"
)

func TestValidateRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ok := Control{Kind: Block, Until: now.Add(time.Hour), Reason: "r"}
	for name, c := range map[string]Control{
		"no kind":          {Until: ok.Until, Reason: "r"},
		"ended":            {Kind: Block, Until: now, Reason: "r"},
		"too long":         {Kind: Block, Until: now.Add(MaxDuration + time.Second), Reason: "r"},
		"no reason":        {Kind: Block, Until: ok.Until, Reason: "  "},
		"long reason":      {Kind: Block, Until: ok.Until, Reason: strings.Repeat("x", maxReason+1)},
		"newline":          {Kind: Block, Until: ok.Until, Reason: "a\nb"},
		"bad utf-8":        {Kind: Block, Until: ok.Until, Reason: "a\xffb"},
		"factor on block":  {Kind: Block, Factor: 2, Until: ok.Until, Reason: "r"},
		"scale 0":          {Kind: Scale, Until: ok.Until, Reason: "r"},
		"scale too big":    {Kind: Scale, Factor: 1001, Until: ok.Until, Reason: "r"},
		"scale 4 decimals": {Kind: Scale, Factor: 1.0005, Until: ok.Until, Reason: "r"},
	} {
		if err := c.Validate(now); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ratelimit.ErrInvalid", name, err)
		}
	}
	if err := ok.Validate(now); err != nil {
		t.Fatal(err)
	}
}
