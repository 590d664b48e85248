package controls

import "github.com/slidegate/slidegate/pkg/ratelimit/internal/keys"

// What this package's external tests read of its insides.
var (
	FormatRecord = formatRecord
	CeilMilli    = ceilMilli
)

// MaxControls is maxControls.
const MaxControls = maxControls

// KeysOf is the key space s writes to.
func KeysOf(s *Store) keys.Space { return s.cfg().Keys }
