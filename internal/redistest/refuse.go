package redistest

import (
	"strings"
	"testing"
	"time"
)

// EachRefusal runs fn once for each error reply with which Redis refuses a command unrun
// until it is ready (LOADING after a restart, CLUSTERDOWN and TRYAGAIN in a failover), in
// a subtest named by its first word, on a fresh miniredis b. Each call of refuse makes b
// answer every command with that reply for 300ms, well within a client's default 3s
// timeout, and normally after that.
func EachRefusal(t *testing.T, fn func(t *testing.T, b *Backend, refuse func())) {
	for _, refusal := range []string{
		"LOADING Redis is loading the dataset in memory",
		"CLUSTERDOWN The cluster is down",
		"TRYAGAIN Multiple keys request during rehashing of slot",
	} {
		t.Run(strings.Fields(refusal)[0], func(t *testing.T) {
			b := Mini(t)
			fn(t, b, func() {
				b.Mini.SetError(refusal)
				time.AfterFunc(300*time.Millisecond, func() { b.Mini.SetError("") })
			})
		})
	}
}
