package semaphore

import (
	"fmt"
	"time"

	"github.com/relock-go/relock/internal/lockerr"
	"github.com/relock-go/relock/internal/permits"
)

// LeaseOption changes how AcquireLease waits.
type LeaseOption func(*permits.LeaseSettings)

// WithWaitTimeout bounds how long AcquireLease waits for the permits, and only that, as
// Redisson's tryAcquire(waitTime, ...) does: when it runs out AcquireLease fails with an
// error for which errors.Is(err, context.DeadlineExceeded) holds, and takes nothing. A
// deadline on the context given to AcquireLease bounds the wait too, but the lease's
// context derives from it and would end at that deadline while the permits stay leased;
// WithWaitTimeout's bound does not pass to the lease. d must be positive, or the call fails
// with ErrInvalidOption.
func WithWaitTimeout(d time.Duration) LeaseOption {
	return func(s *permits.LeaseSettings) {
		if d <= 0 {
			s.Err = fmt.Errorf("%w: wait timeout %v; it must be positive", lockerr.ErrInvalidOption, d)
			return
		}
		s.Wait = d
	}
}
