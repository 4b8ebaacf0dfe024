package relock

import "github.com/relock-go/relock/internal/lockerr"

// Errors returned by relock's locks. Each comes wrapped with the operation and the lock's
// name (as *Error), so test for them with errors.Is.
var (
	// ErrNotHeld: unlock or query by an owner that does not hold the lock, including a
	// context that carries no owner and a hold whose lease ran out.
	ErrNotHeld = lockerr.ErrNotHeld
	// ErrLocked: TryLock found the lock held by another owner.
	ErrLocked = lockerr.ErrLocked
	// ErrLeaseLost: the cause of a hold's context when the client learns the hold is gone.
	ErrLeaseLost = lockerr.ErrLeaseLost
	// ErrUpgrade: a reader asked for the write lock of a read-write lock.
	ErrUpgrade = lockerr.ErrUpgrade
	// ErrWrongType: the key holds data that is not this kind of lock, such as a hash
	// without a lock's shape (fields "<uuid>:<n>" with positive counts, and for a
	// read-write lock "mode"); it is left untouched.
	ErrWrongType = lockerr.ErrWrongType
	// ErrClosed: the client was closed; waiters return it too.
	ErrClosed = lockerr.ErrClosed
	// ErrInvalidName: the lock name is empty, its keys would not share a cluster slot (it
	// holds "{" without a non-empty hash tag "{...}", or "}" without "{"), or its keys
	// would be another name's ("{x}" is only a hash tag and would share the keys of "x"; a
	// name that starts with a prefix of the layout is another lock's key). The error says
	// which.
	ErrInvalidName = lockerr.ErrInvalidName
	// ErrInvalidLease: a lease shorter than a millisecond.
	ErrInvalidLease = lockerr.ErrInvalidLease
	// ErrNotSynced: WithSyncReplicas was set and no replica confirmed an acquisition in
	// time; the acquisition was rolled back.
	ErrNotSynced = lockerr.ErrNotSynced
	// ErrInvalidOption: another option out of its range, such as a fair lock's refresh
	// period under 10ms.
	ErrInvalidOption = lockerr.ErrInvalidOption
	// ErrInvalidCount: a semaphore's or a count-down latch's count out of its range:
	// acquiring or releasing fewer than one permit, setting fewer than zero, setting a
	// latch's count below one.
	ErrInvalidCount = lockerr.ErrInvalidCount
	// ErrNilArgument: a nil context, or a nil function given to Do. Nothing was sent and
	// nothing changed.
	ErrNilArgument = lockerr.ErrNilArgument
)

// Error is the type of the errors relock's locks return: the operation, the lock's name
// and the cause, which errors.Is and errors.As see through.
type Error = lockerr.Error
