// Package observe is how a program hears what a relock client does with its locks: each
// acquisition with how long it waited and what ended the wait, each release with how long
// the lock was held, holds lost or abandoned, lease renewals failing and recovering, and
// the subscriber connection coming back. Give a client an Observer with
// relock.WithObserver; package relock/otel turns it into OpenTelemetry metrics and spans.
//
// A client without an observer pays nothing for it. With one, the observer is called
// synchronously, on the goroutine that did the work (for renewals, losses and reconnects,
// the client's own goroutines, some while the client holds its own locks): it must be
// quick, must not block, and must not call the client.
package observe

import "time"

// Observer hears a client's events. Embed Base to implement only some of them: methods
// added to Observer later get Base's, which do nothing.
type Observer interface {
	// Acquired is called when a Lock or TryLock call gets the lock: a first hold or a
	// re-entry.
	Acquired(Acquisition)
	// Released is called when an Unlock releases the owner's last hold of a lock: the
	// lock is free of it.
	Released(Hold)
	// LeaseLost is called when a hold is found lost: a renewal found the owner gone, the
	// hold's local deadline passed without a renewal, or an Unlock found nothing to
	// release. The hold's context has ended with cause relock.ErrLeaseLost.
	LeaseLost(Hold)
	// Abandoned is called when no context that could release a hold is left (every context
	// naming its owner became unreachable without an Unlock): the watchdog stopped
	// renewing it, and the lock frees when its lease runs out.
	Abandoned(Hold)
	// RenewalFailed is called when a round of lease renewals fails after the last one
	// succeeded: the holds are kept and tried again until their leases run out.
	RenewalFailed(error)
	// RenewalRecovered is called when a round of renewals succeeds after failing ones;
	// down is how long they failed.
	RenewalRecovered(down time.Duration)
	// Reconnected is called when the subscriber connection is back after it was lost and
	// its subscriptions are made again; down is how long it was lost. Every waiter then
	// tries again.
	Reconnected(down time.Duration)
}

// Woken says what ended an acquisition's wait.
type Woken int

const (
	// NotWaited: the first attempt got the lock.
	NotWaited Woken = iota
	// ByMessage: the waiter was woken by a release's message, and then got the lock.
	ByMessage
	// ByLease: the waiter woke when the holder's lease was due to run out, and then got
	// the lock.
	ByLease
	// ByBackOff: the waiter of a spin lock tried again after its back-off, and then got
	// the lock.
	ByBackOff
	// ByHandoff: a release in the waiter's own client handed it the lock (a plain lock:
	// see rlock), and it made no attempt of its own.
	ByHandoff
)

func (w Woken) String() string {
	switch w {
	case NotWaited:
		return "not waited"
	case ByMessage:
		return "message"
	case ByLease:
		return "lease"
	case ByBackOff:
		return "back-off"
	case ByHandoff:
		return "handoff"
	}
	return "unknown"
}

// Kind names a kind of lock as events report it.
type Kind string

// The kinds of lock.
const (
	Lock     Kind = "lock"     // relock.Client.Lock
	FairLock Kind = "fairlock" // relock.Client.FairLock
	SpinLock Kind = "spinlock" // relock.Client.SpinLock
	Read     Kind = "read"     // the read side of relock.Client.RWLock
	Write    Kind = "write"    // the write side of relock.Client.RWLock
	// Lease is a lease of permits of relock.Client.Semaphore (semaphore.Weighted's
	// AcquireLease): it is renewed, lost, abandoned and released as a lock's hold is.
	Lease Kind = "lease"
)

// Acquisition is a Lock or TryLock call that got the lock.
type Acquisition struct {
	Lock  string // the lock's name
	Kind  Kind
	Owner string // "<client id>:<n>"
	// Count is the owner's hold count after it: 1 for a first hold, more for a re-entry.
	Count int64
	// Wait is the time from the call to the grant: the round trip alone when it did not
	// wait.
	Wait  time.Duration
	Woken Woken
}

// Hold is a hold that ended.
type Hold struct {
	Lock  string
	Kind  Kind
	Owner string
	// Held is the time from the acquisition that started the hold (its request's send)
	// to the end.
	Held time.Duration
}

// Base implements Observer doing nothing. Embed it in an observer that hears only some
// events.
type Base struct{}

func (Base) Acquired(Acquisition)           {}
func (Base) Released(Hold)                  {}
func (Base) LeaseLost(Hold)                 {}
func (Base) Abandoned(Hold)                 {}
func (Base) RenewalFailed(error)            {}
func (Base) RenewalRecovered(time.Duration) {}
func (Base) Reconnected(time.Duration)      {}
