package redistest

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// CancelAll cancels the context that each worker stored last in cancels, where it keeps the
// cancel function of the call it is making.
func CancelAll(cancels []atomic.Pointer[context.CancelFunc]) {
	for w := range cancels {
		if cancel := cancels[w].Load(); cancel != nil {
			(*cancel)()
		}
	}
}

// CancelStorm cancels the workers' calls (CancelAll) over and over for d. Between rounds
// it pauses for a fraction of a round trip, varied, so that the cancellations land before
// the calls' requests go out, while they are in flight, and while the workers wait.
func CancelStorm(d time.Duration, cancels []atomic.Pointer[context.CancelFunc]) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		CancelAll(cancels)
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	}
}
