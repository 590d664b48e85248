package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestAdhocFailback(t *testing.T) {
	for _, tc := range [][2]int{{1, 1}, {3, 1}} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			t.Parallel()
			c := StartCluster(t, tc[0], tc[1])
			m := c.MasterAddrs(t.Context())[0]
			c.Failover(t, m)
			c.Node(m).Restart(t)
			b := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			var newm string
			for _, a := range c.MasterAddrs(t.Context()) {
				if ok := a; ok != "" {
					v, _ := nodeView(ctx, a)
					for _, e := range v {
						if e.addr == m {
							if mm, _ := v.byID(e.masterID); mm.addr == a {
								newm = a
							}
						}
					}
				}
			}
			err := c.coordinatedFailover(ctx, newm)
			t.Logf("failback of %s to %s: %v in %v", newm, m, err, time.Since(b))
			if err != nil {
				for _, a := range []string{m, newm} {
					data, _ := os.ReadFile(filepath.Join(c.Node(a).dir, logName))
					t.Logf("=== %s\n%s", a, data)
				}
			}
		})
	}
}
