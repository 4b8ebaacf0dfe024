// Package retry sends a Redis call again when that is safe: when the call never got an
// answer (the caller decides whether the request may have run), or when Redis answered
// that it refused the command unrun until the server or the cluster is ready. Every call
// that retries is bounded by its context, with a backoff between sends.
package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockerr"
)

// The backoff between retries of one call: doubling from minBackoff up to maxBackoff.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = 200 * time.Millisecond
)

// Do calls f until it returns nil or an error that is an answer rather than a failure to
// get one (see retryable), or until ctx ends; it backs off between calls. An error wrapped
// by Final is returned at once, unwrapped.
func Do(ctx context.Context, f func() error) error {
	for backoff := minBackoff; ; backoff = min(2*backoff, maxBackoff) {
		err := f()
		// f returns a Final error as it is, never wrapped: a type assertion finds it, and
		// costs no allocation, unlike errors.As.
		stop, isFinal := err.(finalErr)
		switch {
		case err == nil:
			return nil
		case isFinal:
			return stop.err
		case !retryable(err) || !sleep(ctx, backoff):
			return err
		}
	}
}

// Refusals calls f until it returns anything but Redis's refusal of a command unrun
// (Refused), or until ctx ends: for a call that must not be sent again when its reply was
// lost, which is then f's error, returned at once.
func Refusals(ctx context.Context, f func() error) error {
	return Do(ctx, func() error {
		err := f()
		if err != nil && !Refused(err) {
			return Final(err)
		}
		return err
	})
}

// finalErr is an error that Do returns without trying again.
type finalErr struct{ err error }

func (e finalErr) Error() string { return e.err.Error() }

// Final marks err (nil stays nil) as one that Do must not try again.
func Final(err error) error {
	if err == nil {
		return nil
	}
	return finalErr{err}
}

// retryable reports whether a call may be sent again: the request may not have reached
// Redis or its reply was lost. A Redis error is an answer, not a failure to get one, and
// so is a verdict of relock's own (ErrNotSynced); except the answers that say the command
// was refused unrun until the server or the cluster is ready (CLUSTERDOWN and TRYAGAIN
// during a failover, LOADING after a restart). A closed client will not send it again.
//
// A context error is a failure like any other: whether the call's own context ended is
// for retry to ask of that context. rueidis also ends calls with a deadline of its own,
// such as a new connection's handshake, bounded by its dial timeout, when the server is
// slow to answer; the call's deadline may be far off then, and is what bounds the retries.
func retryable(err error) bool {
	if _, ok := rueidis.IsRedisErr(err); ok {
		return Refused(err)
	}
	return !errors.Is(err, lockerr.ErrNotSynced) && !errors.Is(err, rueidis.ErrClosing)
}

// Abandon returns, when err is a refusal (Refused) and ctx has ended, ctx's error with the
// refusal: the refused call did not run, so nothing is left to finish once its caller has
// stopped waiting. Otherwise it returns nil: send again, within the call's own bound.
func Abandon(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && Refused(err) {
		return fmt.Errorf("%w (the last attempt was refused: %w)", cerr, err)
	}
	return nil
}

// Refused reports whether err is Redis's answer that it did not run the command and will
// once the server or the cluster is ready.
func Refused(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && (re.IsClusterDown() || re.IsTryAgain() || re.IsLoading())
}

// sleep waits d unless ctx ends first; it reports whether the full d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
