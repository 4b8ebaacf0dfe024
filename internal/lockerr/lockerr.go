// Package lockerr holds relock's error values and the error type that names the lock an
// error is about. The root package re-exports the values; lock packages return them
// wrapped in *Error so that callers can both match them with errors.Is and see which
// lock and which operation failed.
package lockerr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// The sentinel errors. Their texts are short because *Error adds the operation and the
// lock's name around them.
var (
	ErrNotHeld       = errors.New("lock not held by this owner")
	ErrLocked        = errors.New("lock held by another owner")
	ErrLeaseLost     = errors.New("lease lost")
	ErrUpgrade       = errors.New("read hold cannot be upgraded to a write hold")
	ErrWrongType     = errors.New("key holds data that is not this kind of lock")
	ErrClosed        = errors.New("client closed")
	ErrInvalidName   = errors.New("invalid lock name")
	ErrInvalidLease  = errors.New("invalid lease")
	ErrInvalidOption = errors.New("invalid option")
	ErrNotSynced     = errors.New("no replica confirmed the acquisition")
	ErrInvalidCount  = errors.New("invalid count")
	ErrNilArgument   = errors.New("nil argument")
)

// ErrNotMade is the error of every call of a lock, semaphore or latch that no client made:
// a zero value (a struct field, say), which has no client to send through.
var ErrNotMade = fmt.Errorf("%w: not made by a relock.Client (a zero value)", ErrInvalidOption)

// OrZero returns p, or for a nil p a new zero T: the nil pointer of a lock, semaphore,
// latch or client is taken for its zero value, which no client made, so that its every
// call fails with ErrNotMade as the zero value's does, rather than panicking.
func OrZero[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}

// ErrNilContext and ErrNilFunc are the errors of a call given a nil context, or a nil function
// to run under the lock.
var (
	ErrNilContext = fmt.Errorf("%w: the context is nil (pass context.Background() for none)", ErrNilArgument)
	ErrNilFunc    = fmt.Errorf("%w: the function to run is nil", ErrNilArgument)
)

// Error is the error a lock method returns: the operation, the lock's name and the cause.
type Error struct {
	Op   string // the method, such as "lock" or "unlock"
	Name string // the lock's name as the caller gave it
	Err  error  // a sentinel above, a context error, or an error from Redis
}

// New wraps err with the operation and the lock's name. It returns nil for a nil err.
func New(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Name: name, Err: err}
}

// Redis wraps err as New does, and first turns the scripts' refusals into relock's
// errors: a WRONGTYPE reply (the key holds data of another kind, which the scripts refuse
// to touch) into ErrWrongType, a RANGE reply (a semaphore's count that would leave the
// range it counts exactly, lua/count.lua) into ErrInvalidCount with the script's reason.
//
// A counter that Redis cannot increment is data of another kind too: a fencing counter
// that holds a string which is no whole number, or one at the top of the 64-bit range.
// The scripts increment it before any other write, so the call failed with nothing
// changed, as a refusal does.
func Redis(op, name string, err error) error {
	// Redis puts the code first; miniredis wraps script errors, so look anywhere.
	if re, ok := rueidis.IsRedisErr(err); ok {
		msg := re.Error()
		if strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, notCounter) || strings.Contains(msg, counterOverflow) {
			err = ErrWrongType
		} else if _, reason, ok := strings.Cut(msg, "RANGE "); ok {
			err = fmt.Errorf("%w: %s", ErrInvalidCount, reason)
		}
	}
	return New(op, name, err)
}

// Redis's (and miniredis's) replies to INCR on a value it cannot count on.
const (
	notCounter      = "value is not an integer or out of range"
	counterOverflow = "increment or decrement would overflow"
)

func (e *Error) Error() string {
	s := "relock: " + e.Op + " " + strconv.Quote(e.Name)
	if e.Err == nil {
		return s
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the cause, so errors.Is(err, ErrNotHeld) and errors.Is(err,
// context.DeadlineExceeded) see through the wrapping.
func (e *Error) Unwrap() error { return e.Err }
