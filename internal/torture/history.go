// Package torture holds the fault-injection torture test of relock's locks (the reentrant
// mutex, the fair lock and the read-write lock) and of its semaphore, and the history
// checkers it uses. The test itself is in torture_test.go (and semaphore_test.go for the
// semaphore's workload).
package torture

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/relock-go/relock/internal/leases"
)

// Write outcomes of a section's fenced write.
const (
	WriteAccepted = "accepted"
	WriteRejected = "rejected"
	WriteError    = "error"
	WriteNone     = ""
)

// ModeRead marks a read hold of a read-write lock; every other record is exclusive.
const ModeRead = "read"

// Record is one line of a worker's history: one attempt to enter the critical section.
// Times are time.Now().UnixNano(), comparable across the processes of one machine.
type Record struct {
	Hello    bool   `json:"hello,omitempty"` // the worker's first line: Worker, Client, PID
	Done     bool   `json:"done,omitempty"`  // the worker's last line: all iterations ran
	Client   string `json:"client,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Worker   string `json:"w"`
	Lock     string `json:"lock,omitempty"` // which lock: records of different locks never conflict
	Mode     string `json:"mode,omitempty"` // ModeRead for a read hold, "" for an exclusive one
	G        int    `json:"g"`
	I        int    `json:"i"`
	Call     int64  `json:"call"`  // Lock called
	Acq      int64  `json:"acq"`   // Lock returned
	Check    int64  `json:"check"` // just before the liveness check
	End      int64  `json:"end"`   // section ended (after the liveness check)
	Rel      int64  `json:"rel"`   // Unlock returned
	LockErr  string `json:"lockErr,omitempty"`
	Token    int64  `json:"token"`           // fencing token of the hold
	Live     bool   `json:"live"`            // the hold's context was live at End
	Cause    string `json:"cause,omitempty"` // context.Cause when not live
	Write    string `json:"write,omitempty"` // accepted, rejected, error
	WriteErr string `json:"writeErr,omitempty"`
	Count    int64  `json:"count"`    // counter value after an accepted write
	Last     int64  `json:"last"`     // highest accepted token, as the resource answered
	UnlockOK bool   `json:"unlockOK"` // Unlock returned nil
	Unlock   string `json:"unlock,omitempty"`
	// Lost: the hold's context was not live at End and its cause was ErrLeaseLost.
	Lost bool `json:"lost,omitempty"`

	// Owner is the hash field of the hold (or of the attempt): "<client>:<n>", or for a
	// write hold "<client>:<n>:write", as the acquire script was sent it.
	Owner string `json:"owner,omitempty"`
	// Queued: for a fair lock, every attempt of the Lock call that Redis answered "wait",
	// as {sent, reply}: the script ran in between and left the waiter queued, with an
	// entry that lives until at least sent + the entry lifetime unless refreshed.
	Queued [][2]int64 `json:"queued,omitempty"`

	// Linger marks a note, not an attempt: the section that holds Owner's hold of Lock
	// lingers, waiting for its context to end (the parent asked for it, to delete the
	// hold behind its back). The section's own record follows later.
	Linger bool `json:"linger,omitempty"`
	// Of a section that lingered: when it began to, when it saw its context end (0: not
	// within the linger's bound), and whether the cause was ErrLeaseLost.
	Lingered   bool  `json:"lingered,omitempty"`
	LingerFrom int64 `json:"lingerFrom,omitempty"`
	LingerDone int64 `json:"lingerDone,omitempty"`
	LingerLost bool  `json:"lingerLost,omitempty"`
	// Of a section that lingered: when the context of its Lock call, which the hold's
	// derives from, reached its deadline (0: none), ending the hold's context with
	// context.DeadlineExceeded if nothing ended it before.
	Bound int64 `json:"bound,omitempty"`
	// Of a section that lingered, as its client's renewals went: Basis is when the latest
	// request that found the hold in Redis was sent (the acquiring one, or a renewal), so
	// the hold's local deadline is Basis + lease; Gone is when the first renewal reply
	// that found the hold gone arrived (0: none did).
	Basis int64 `json:"basis,omitempty"`
	Gone  int64 `json:"gone,omitempty"`

	// DelFrom and DelTo are set by the parent, not the worker, for a hold that a fault
	// removed from Redis behind its holder's back (its key deleted, or the server
	// restarted without persistence): the hold was in Redis at DelFrom and gone by DelTo.
	DelFrom int64 `json:"-"`
	DelTo   int64 `json:"-"`
	// LostFrom and LostTo are set by the parent for a hold granted on a restarted server to
	// a Lock call whose earlier grant, on the server before the restart, was lost with it
	// before its reply came: that grant (the same hash field, Owner) was in Redis at
	// LostFrom and gone by LostTo. The client never knew of it, found the owner holding
	// nothing on the new server and asked again, rightly; the record's own hold, with its
	// token, is the second grant, which the restart did not touch.
	LostFrom int64 `json:"-"`
	LostTo   int64 `json:"-"`

	// Of a semaphore section (Lock == LockSemaphore): the permits it asks for. Its record
	// has Call (Acquire called), Acq (Acquire returned), End (the section ended: Release
	// is sent next), Rel (Release returned), LockErr and UnlockOK as a lock section's.
	Permits int64 `json:"k,omitempty"`
	// SemNote marks a note of a semaphore section, not an attempt: one of the Sem* values,
	// written as the section goes so that the parent knows at any moment which sections
	// may hold permits. The section's own record follows at its end.
	SemNote string `json:"sem,omitempty"`
	// Leased marks a section (and its notes) that takes its permits as a lease
	// (AcquireLease): they are renewed while the worker lives and run out within a lease
	// after it dies. LeaseIDs, on the note of an acquire script, are the ids it leases
	// them under (hex, as the script takes them). LeaseLost: the lease's context had ended
	// when the section ended.
	Leased    bool   `json:"leased,omitempty"`
	LeaseIDs  string `json:"ids,omitempty"`
	LeaseLost bool   `json:"leaseLost,omitempty"`
}

// LockSemaphore is the Lock of a semaphore section's records and notes.
const LockSemaphore = "semaphore"

// The notes of a semaphore section (Record.SemNote). The worker's spy writes the first
// four around every acquire script call, the section the last one, each with one write,
// before the step it announces (try, release) or after the reply it reports:
const (
	SemTry     = "try"     // an acquire script is about to be sent
	SemGranted = "granted" // its reply: the permits were taken; Acq is when the reply came
	SemWait    = "wait"    // its reply: not taken, the client waits; no script in flight
	SemError   = "error"   // no reply (timeout, broken connection) or an error reply: Acquire fails
	SemRelease = "release" // Release is about to be sent; End is when the section ended
)

// Attempt reports whether the record is one attempt to enter the section (not the first or
// last line of a worker, nor a note of a lingering or semaphore section).
func (r Record) Attempt() bool { return !r.Hello && !r.Done && !r.Linger && r.SemNote == "" }

// Held reports whether the record is an acquisition.
func (r Record) Held() bool { return r.Attempt() && r.LockErr == "" && r.Acq != 0 }

// Deleted reports whether a fault removed the hold from Redis behind its holder's back.
func (r Record) Deleted() bool { return r.DelFrom != 0 }

// heldUntil returns until when the section surely held its lock alone, as the library
// promises: to End when its context was live then; for a deleted hold, to the deletion
// (Redis kept the hold until then, whatever its context said) or End if sooner. ok is false
// when the record promises nothing.
func (r Record) heldUntil() (until int64, ok bool) {
	if r.Deleted() {
		return min(r.seenLive(), r.DelFrom), true
	}
	return r.seenLive(), r.Live
}

// seenLive is the latest moment the section is known to have held its lock: its liveness
// check (Check), not End. A worker paused (SIGSTOP) between the check and End would
// otherwise claim the pause as held time, while its hold ran out in Redis and another
// owner took the lock. Records without a check fall back to End.
func (r Record) seenLive() int64 {
	if r.Check != 0 {
		return r.Check
	}
	return r.End
}

// Read reports whether the record is a read hold, which other read holds may overlap.
func (r Record) Read() bool { return r.Mode == ModeRead }

func (r Record) String() string {
	mode := ""
	if r.Read() {
		mode = "(read)"
	}
	return fmt.Sprintf("%s%s %s/g%d/i%d token=%d acq=%s end=%s live=%v write=%s cause=%q",
		r.Lock, mode, r.Worker, r.G, r.I, r.Token, time.Unix(0, r.Acq).Format("15:04:05.000000"),
		time.Unix(0, r.End).Format("15:04:05.000000"), r.Live, r.Write, r.Cause)
}

// OfLock returns the records of history that belong to lock.
func OfLock(history []Record, lock string) []Record {
	var rs []Record
	for _, r := range history {
		if r.Lock == lock {
			rs = append(rs, r)
		}
	}
	return rs
}

// Holds returns the acquisitions of history.
func Holds(history []Record) []Record {
	var hs []Record
	for _, r := range history {
		if r.Held() {
			hs = append(hs, r)
		}
	}
	return hs
}

// Overlaps returns the pairs of sections of one lock that ended with a live context,
// overlap in time ([Acq, End] intersects) and may not: two exclusive sections, or a read
// section and an exclusive one (two read sections may overlap). Each section is compared
// with the conflicting live section that started before it and ends last, so a section is
// counted at most once, and every conflicting pair makes its later section count.
//
// A deleted hold counts until its deletion, not to its End: after the deletion another
// holder may come in while the old one, not knowing yet, still runs its section. That is
// the fault's known consequence (fencing turns the stale writer away), not a lock's bug.
func Overlaps(history []Record) [][2]Record {
	byLock := map[string][]Record{}
	var locks []string
	for _, r := range Holds(history) {
		until, ok := r.heldUntil()
		if !ok || until < r.Acq {
			continue
		}
		r.End = until
		if _, ok := byLock[r.Lock]; !ok {
			locks = append(locks, r.Lock)
		}
		byLock[r.Lock] = append(byLock[r.Lock], r)
	}
	var out [][2]Record
	for _, l := range locks {
		live := byLock[l]
		sort.Slice(live, func(i, j int) bool { return live[i].Acq < live[j].Acq })
		anyFar, writeFar := -1, -1 // of the sections so far, the one that ends last; the exclusive one
		for i, r := range live {
			far := anyFar // an exclusive section conflicts with every other
			if r.Read() {
				far = writeFar // a read section only with exclusive ones
			}
			if far >= 0 && r.Acq <= live[far].End {
				out = append(out, [2]Record{live[far], r})
			}
			if anyFar < 0 || r.End > live[anyFar].End {
				anyFar = i
			}
			if !r.Read() && (writeFar < 0 || r.End > live[writeFar].End) {
				writeFar = i
			}
		}
	}
	return out
}

// The porcupine model.
//
// The history is checked against the sequential specification of a fenced mutex: a state
// of (holder, last token). Acquire(o) → t is legal only when nobody holds the lock and
// t > last, and makes o the holder with last = t; Release(o) is legal only when o holds
// it, and frees it. Every acquisition is one owner o (fresh for each Lock call), so the
// history is a set of Acquire/Release pairs.
//
// The intervals are where each step can have happened in Redis:
//
//   - Acquire: [Call, Acq], from the call of Lock to its return.
//   - Release of a section whose context was live at End: [End, Rel]. The library promises
//     that a live context means the hold is still there (its view errs early), so the
//     hold ended in Redis no earlier than End, and no later than the return of an Unlock
//     that succeeded. When Unlock failed the hold may have lived on until its lease ran
//     out in Redis: the release is left open to the end of the history.
//   - Release of a section whose context ended (lease lost): [Call, Rel] or open as above.
//     The hold ended at some unknown moment after it was granted, which may be before
//     Lock returned (a process paused past the lease while Lock returns); the library
//     promises nothing about it but that it was granted exclusively.
//   - Release of a deleted hold: [DelFrom, DelTo], the deletion, whatever the section
//     did after it.
//
// A hold granted again after a restart lost its Lock call's first grant (LostFrom) is two
// holds of one owner: the record's own, as above, and the lost one, whose token nobody
// learned: Acquire at [Call, LostFrom) (the grant ran before the restart cut the
// connections and looked; the end is open, so that another hold found at the look, whose
// release is at [LostFrom, LostTo] as a deleted one's, is a second holder at once),
// legal only when nobody holds the lock and leaving the last token as it was, and Release
// at [LostFrom, LostTo], the restart.
//
// A hold whose token is unknown (0) is left out. It is one whose Lock learned of its grant
// only by asking after the reply was lost (the reply, with its token, never came), and
// whose context had ended before the section asked for the token: its deadline, counted
// from the lost request's send, had passed. Such a section promises nothing, and its
// acquisition has no token to place among the others.
//
// A lock that lets two live sections overlap, or grants a hold while another is live,
// has no linearization: both Acquires are forced before either Release. Tokens that do
// not grow in the order of acquisition are refused by the same step.
type lockInput struct {
	Acquire bool
	Owner   int
	NoToken bool // an acquisition whose token nobody learned (a grant lost in a restart)
}

type lockState struct {
	Holder int // -1: free
	Last   int64
}

// LockModel is the fenced-mutex model described above.
var LockModel = porcupine.Model{
	Init: func() interface{} { return lockState{Holder: -1} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in := state.(lockState), input.(lockInput)
		if in.Acquire {
			t := output.(int64)
			if s.Holder != -1 || !in.NoToken && t <= s.Last {
				return false, s
			}
			if in.NoToken {
				t = s.Last
			}
			return true, lockState{Holder: in.Owner, Last: t}
		}
		if s.Holder != in.Owner {
			return false, s
		}
		return true, lockState{Holder: -1, Last: s.Last}
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(lockInput)
		if in.Acquire && in.NoToken {
			return fmt.Sprintf("acquire(%d) -> ?", in.Owner)
		}
		if in.Acquire {
			return fmt.Sprintf("acquire(%d) -> %v", in.Owner, output)
		}
		return fmt.Sprintf("release(%d)", in.Owner)
	},
}

// Operations turns the exclusive acquisitions of history, which must be one lock's, into
// porcupine operations on LockModel; read holds are left out.
func Operations(history []Record) []porcupine.Operation {
	ops, _ := operations(history)
	return ops
}

// opOf tells which record an operation of Operations stands for, and for which step.
type opOf struct {
	r    Record
	what string // acquire, release, lost acquire, lost release
}

// operations returns Operations and, for each, what it stands for.
func operations(history []Record) ([]porcupine.Operation, []opOf) {
	hs := exclusive(history)
	end := int64(math.MaxInt64 / 2)
	var ops []porcupine.Operation
	var of []opOf
	for i, h := range hs {
		if h.LostFrom != 0 {
			// The lost grant: an owner of its own, numbered past the records'.
			o := len(hs) + i
			ops = append(ops,
				porcupine.Operation{ClientId: o, Input: lockInput{Acquire: true, Owner: o, NoToken: true}, Call: h.Call, Output: int64(0), Return: max(h.Call, h.LostFrom-1)},
				porcupine.Operation{ClientId: o, Input: lockInput{Owner: o}, Call: h.LostFrom, Return: h.LostTo})
			of = append(of, opOf{h, "lost acquire"}, opOf{h, "lost release"})
		}
		client := i
		ops = append(ops, porcupine.Operation{
			ClientId: client, Input: lockInput{Acquire: true, Owner: i}, Call: h.Call, Output: h.Token, Return: h.Acq,
		})
		call, ret := h.seenLive(), h.Rel
		if !h.Live {
			call = h.Call
		}
		if !h.UnlockOK {
			ret = end
		}
		if h.Deleted() {
			call, ret = h.DelFrom, h.DelTo
		}
		ops = append(ops, porcupine.Operation{
			ClientId: client, Input: lockInput{Owner: i}, Call: call, Return: ret,
		})
		of = append(of, opOf{h, "acquire"}, opOf{h, "release"})
	}
	return ops, of
}

// exclusive returns the exclusive holds of history that the model checks: those with a
// token (see the model).
func exclusive(history []Record) []Record {
	var hs []Record
	for _, h := range Holds(history) {
		if !h.Read() && (h.Token != 0 || h.Live) {
			hs = append(hs, h)
		}
	}
	return hs
}

// CheckLinearizable runs porcupine on the exclusive sections of history, which must be one
// lock's, bounded by timeout.
func CheckLinearizable(history []Record, timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(LockModel, Operations(history), timeout)
}

// Fencing is what the fenced counter tells about history.
type Fencing struct {
	Accepted     int   // writes the resource accepted, as recorded
	Rejected     int   // writes the resource turned away
	Errors       int   // writes whose outcome is unknown (no reply in time): they may count
	Counter      int64 // the counter's final value
	LostUpdates  int   // accepted writes the counter does not count, or counted twice
	Unrecorded   int64 // counter increments no record accounts for (killed writers)
	OutOfOrder   int   // accepted writes whose token is lower than an earlier accepted one
	LiveRejected []Record
	Unsuperseded []Record // rejected writes for which no higher token was ever handed out
}

// CheckFencing compares history, which must be one lock's, with the final value of the
// counter its exclusive sections write (read sections write nothing).
func CheckFencing(history []Record, counter int64) Fencing {
	f := Fencing{Counter: counter}
	var acc []Record
	var maxToken int64
	for _, r := range Holds(history) {
		maxToken = max(maxToken, r.Token)
	}
	seen := map[int64]bool{}
	for _, r := range Holds(history) {
		switch r.Write {
		case WriteAccepted:
			f.Accepted++
			acc = append(acc, r)
			if seen[r.Count] || r.Count < 1 || r.Count > counter {
				f.LostUpdates++
			}
			seen[r.Count] = true
		case WriteError:
			f.Errors++
		case WriteRejected:
			f.Rejected++
			// A deleted hold's write may have come after the deletion and a newer holder's
			// write: turned away rightly, whatever its context said.
			if r.Live && (!r.Deleted() || r.Check < r.DelFrom) {
				f.LiveRejected = append(f.LiveRejected, r)
			}
			if r.Token >= maxToken {
				f.Unsuperseded = append(f.Unsuperseded, r)
			}
		}
	}
	if d := int64(f.Accepted) - counter; d > 0 {
		f.LostUpdates += int(d)
	} else {
		f.Unrecorded = -d
	}
	sort.Slice(acc, func(i, j int) bool { return acc[i].Count < acc[j].Count })
	for i := 1; i < len(acc); i++ {
		if acc[i].Token < acc[i-1].Token {
			f.OutOfOrder++
		}
	}
	return f
}

// Window is a span of time [From, To], in UnixNano.
type Window struct{ From, To int64 }

// queueMargin is taken off a fair waiter's entry lifetime, for the millisecond rounding of
// Redis's TIME and the strict comparison by which an entry is found dead.
const queueMargin = 25 * time.Millisecond

// OrderViolation is a fair grant out of turn: Jumper was granted while Skipped, a live
// waiter queued since before Jumper first tried, was still waiting.
type OrderViolation struct{ Skipped, Jumper Record }

// queueSpans returns the spans during which a fair waiter was surely in the queue, live,
// from its attempts answered "wait" (r.Queued). Each attempt's script ran between its
// send and its reply and left an entry that lives until at least send + entry: so the
// waiter is surely queued from the reply on, and stays so while each next attempt's
// reply comes before the entry of the one before can have run out. A gap (the waiter was
// paused, cut off, or late) ends a span: its entry may have been taken for dead, and it
// may have queued again at the back. A cut (a server restart, which empties every queue)
// ends a span too, and an attempt that overlaps a cut tells nothing.
//
// A waiter that was never granted is in the queue no later than its last reply: after
// it, it may have given up and left.
//
// Redis runs on the workers' machine, so the scripts' TIME and the workers' clocks are
// one clock.
func queueSpans(r Record, entry time.Duration, cuts []Window) []Window {
	life := int64(entry - queueMargin)
	cutIn := func(from, to int64) (int64, bool) { // the first cut that starts in [from, to]
		first, ok := int64(math.MaxInt64), false
		for _, c := range cuts {
			if c.From >= from && c.From <= to && c.From < first {
				first, ok = c.From, true
			}
		}
		return first, ok
	}
	overlapsCut := func(from, to int64) bool {
		for _, c := range cuts {
			if c.From <= to && from <= c.To {
				return true
			}
		}
		return false
	}
	qs := append([][2]int64(nil), r.Queued...)
	sort.Slice(qs, func(i, j int) bool { return qs[i][0] < qs[j][0] })
	var out []Window
	var cur *Window
	closeCur := func() {
		if cur == nil {
			return
		}
		if c, ok := cutIn(cur.From, cur.To); ok {
			cur.To = c
		}
		if !r.Held() && len(qs) > 0 {
			cur.To = min(cur.To, qs[len(qs)-1][1])
		}
		if cur.To > cur.From {
			out = append(out, *cur)
		}
		cur = nil
	}
	for _, q := range qs {
		sent, got := q[0], q[1]
		if overlapsCut(sent, got) {
			closeCur()
			continue
		}
		if cur != nil && got < cur.To {
			if _, cut := cutIn(cur.From, got); !cut {
				cur.To = max(cur.To, sent+life)
				continue
			}
		}
		closeCur()
		cur = &Window{From: got, To: sent + life}
	}
	closeCur()
	return out
}

// CheckFairOrder finds the grants of a fair lock out of turn in history, which must be
// the fair lock's. A grant (fencing tokens order the grants) to B breaks the order when
// a waiter A was surely in the queue and live (queueSpans) from before B's Lock call
// until after B's Lock returned, and A was not granted before B. The fair lock promises
// that, and nothing about waiters that died (killed, paused or cut off past their
// entry's lifetime: skipped as dead), that gave up, or that a restart dropped (cuts).
// Each jumper counts once.
func CheckFairOrder(history []Record, entry time.Duration, cuts []Window) []OrderViolation {
	grants := Holds(history)
	sort.Slice(grants, func(i, j int) bool { return grants[i].Call < grants[j].Call })
	skipped := map[int]Record{} // by index in grants: the first waiter found jumped
	for _, a := range history {
		if !a.Attempt() || len(a.Queued) == 0 {
			continue
		}
		for _, sp := range queueSpans(a, entry, cuts) {
			// The grants whose Lock call began after the waiter was queued, and returned
			// while it still was (Call ≤ Acq, so Call ≤ sp.To).
			i := sort.Search(len(grants), func(i int) bool { return grants[i].Call > sp.From })
			for ; i < len(grants) && grants[i].Call <= sp.To; i++ {
				b := grants[i]
				if b.Acq > sp.To || (a.Held() && grantedFirst(a, b)) {
					continue // still queued when b returned? unknown; or a was granted first
				}
				if _, ok := skipped[i]; !ok {
					skipped[i] = a
				}
			}
		}
	}
	out := make([]OrderViolation, 0, len(skipped))
	for i, a := range skipped {
		out = append(out, OrderViolation{Skipped: a, Jumper: grants[i]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Jumper.Token < out[j].Jumper.Token })
	return out
}

// grantedFirst reports whether the grant to a, a waiter that was granted, may have come
// before the grant to b. Fencing tokens order the grants; but a grant adopted after its
// reply was lost, whose hold ended before its section could read the token, has none
// (Token 0). Its grant came between its Lock call and its return, and a's after a's last
// "wait" reply: b was surely granted first only if it returned before that reply.
func grantedFirst(a, b Record) bool {
	if b.Token != 0 {
		return a.Token <= b.Token
	}
	return b.Acq >= a.Queued[len(a.Queued)-1][1]
}

// LostHold is a deleted hold whose holder's context did not end as it must.
type LostHold struct {
	R   Record
	Why string
}

// lostSlack is how far before its local deadline a lingering hold's context must be seen
// to end to count as ended by the renewal that found it gone; and how far before the
// deadline that renewal's reply must have come for the check to apply.
const (
	lostSlack = 100 * time.Millisecond
	goneSlack = 300 * time.Millisecond
)

// CheckDeletedHolds checks the deleted holds of history whose sections lingered (waited
// for their context to end) across the deletion. Each one's context must end, with cause
// ErrLeaseLost unless the section's own bound ended it before its local deadline; and
// when a renewal told the client the hold was gone (Gone), because of it: a context that
// lives on to its local deadline (Basis + lease, less the allowance for clocks:
// leases.Allowance) after such a reply means the client
// ignored what Redis said. It returns the holds that fail, and how many
// deleted holds (lingering or not) saw their context end with ErrLeaseLost.
func CheckDeletedHolds(history []Record, lease time.Duration) (bad []LostHold, lost int) {
	for _, r := range Holds(history) {
		if !r.Deleted() {
			continue
		}
		if r.Lost || (r.Lingered && r.LingerDone != 0 && r.LingerLost) {
			lost++
		}
		if !r.Lingered {
			continue
		}
		deadline := r.Basis + int64(lease-leases.Allowance(lease))
		switch {
		case r.LingerDone == 0:
			bad = append(bad, LostHold{r, fmt.Sprintf("its context was still live %v after the deletion",
				time.Duration(r.End-r.DelTo).Round(time.Millisecond))})
		case !r.LingerLost && r.Bound != 0 && r.LingerDone >= r.Bound && r.Bound < deadline+int64(lostSlack):
			// The section's own bound came first, before the client could have found the
			// hold gone (at the latest, its local deadline): nothing to check.
		case !r.LingerLost:
			bad = append(bad, LostHold{r, "its context ended with another cause than ErrLeaseLost"})
		case r.Gone != 0 && r.Basis != 0 && r.Gone < deadline-int64(goneSlack) && r.LingerDone >= deadline-int64(lostSlack):
			bad = append(bad, LostHold{r, fmt.Sprintf("a renewal found it gone %v before its local deadline, yet its context lived on to the deadline",
				time.Duration(deadline-r.Gone).Round(time.Millisecond))})
		}
	}
	return bad, lost
}

// RestartOverlap measures, after a restart without persistence that lost the holds
// marked deleted at it (DelFrom == restart.From) and let clients back in at restart.To,
// how long an old hold's context stayed live after a new holder of the same lock (one
// granted on the restarted server) had acquired: the context of a hold that lingered
// lived until it was seen to end, another one whose section found it live at least until
// its Check. It returns the longest such overlap over the conflicting pairs, 0 if none.
func RestartOverlap(history []Record, restart Window) time.Duration {
	var worst int64
	holds := Holds(history)
	for _, o := range holds {
		if o.DelFrom != restart.From {
			continue
		}
		var live int64
		switch {
		case o.Lingered && o.LingerDone != 0:
			live = o.LingerDone
		case o.Lingered:
			live = o.End // never seen to end: at least until its section went on
		case o.Live:
			live = o.Check
		default:
			continue
		}
		for _, n := range holds {
			if n.Lock != o.Lock || n.Deleted() && n.DelFrom == restart.From || n.Acq <= restart.To || (o.Read() && n.Read()) {
				continue
			}
			worst = max(worst, live-n.Acq)
		}
	}
	return time.Duration(worst)
}

// SemExcess is a moment at which the semaphore sections of a history held more permits
// than the semaphore has: Made is the acquisition that went past, Holding every section
// that held permits then (Made among them), Sum their permits.
type SemExcess struct {
	Made    Record
	Holding []Record
	Sum     int64
}

// CheckSemaphore checks the semaphore sections of history (records of LockSemaphore)
// against a semaphore of n permits: it returns the most permits its sections held at once,
// and each acquisition that took the sum past n.
//
// A section surely held its permits over [Acq, End], as a lock's section holds its lock
// over [Acq, seenLive] (a leased section's End is when it saw its lease's context live; one
// that found it ended, LeaseLost, is left out, since its lease may have run out as soon
// as it was granted): the acquire script that took them ran before Acquire returned
// (Acq), and the release script that gives them back runs after Release was called,
// which comes after End. Everything else is left out, so that it can only hide an excess,
// never make one: a failed Acquire (its script may still have taken the permits when its
// reply was lost: they are then nobody's, and lower what others can take), and a section
// of a killed worker, which wrote no record (its permits are lost for good with the plain
// semaphore, as a killed lock holder's hold lasts until its lease runs out). The
// semaphore holds no lease: a holder frozen by SIGSTOP, cut off by a blackhole or whose
// server restarted still holds its permits, so unlike a lock's section, its interval
// runs to End, not to a liveness check.
//
// The bound n holds only while the semaphore's count plus the permits its live holders
// will give back never exceeds n, which is the parent's part: its repairs (semaphore_test.go)
// add permits only as many as were surely lost, and re-set the count after a restart to n
// minus what may still be held. Times are time.Now().UnixNano() of the workers, one
// machine's clock. At equal times a release counts before an acquisition.
func CheckSemaphore(history []Record, n int64) (most int64, over []SemExcess) {
	type event struct {
		at    int64
		delta int64
		i     int
	}
	var secs []Record
	for _, r := range history {
		if r.Lock == LockSemaphore && r.Held() && r.End >= r.Acq && !r.LeaseLost {
			secs = append(secs, r)
		}
	}
	evs := make([]event, 0, 2*len(secs))
	for i, r := range secs {
		evs = append(evs, event{r.Acq, r.Permits, i}, event{r.End, -r.Permits, i})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta
	})
	var sum int64
	holding := map[int]bool{}
	for _, e := range evs {
		sum += e.delta
		if e.delta < 0 {
			delete(holding, e.i)
			continue
		}
		holding[e.i] = true
		most = max(most, sum)
		if sum > n {
			x := SemExcess{Made: secs[e.i], Sum: sum}
			for j := range holding {
				x.Holding = append(x.Holding, secs[j])
			}
			sort.Slice(x.Holding, func(a, b int) bool { return x.Holding[a].Acq < x.Holding[b].Acq })
			over = append(over, x)
		}
	}
	return most, over
}

// SemString describes a semaphore section.
func SemString(r Record) string {
	return fmt.Sprintf("%s/g%d/i%d k=%d acq=%s end=%s", r.Worker, r.G, r.I, r.Permits,
		time.Unix(0, r.Acq).Format("15:04:05.000000"), time.Unix(0, r.End).Format("15:04:05.000000"))
}

// ExplainIllegal describes where porcupine gets stuck on the exclusive sections of history
// (one lock's): the last sections of the longest order it found, and the sections it could
// not place after them, as records with their times, so that a failed run can be read
// without its files.
func ExplainIllegal(history []Record, timeout time.Duration) string {
	ops, of := operations(history)
	_, info := porcupine.CheckOperationsVerbose(LockModel, ops, timeout)
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	placed := map[int]bool{}
	for _, i := range longest {
		placed[i] = true
	}
	stamp := func(ns int64) string {
		if ns == 0 || ns >= math.MaxInt64/4 {
			return "-"
		}
		return time.Unix(0, ns).Format("15:04:05.000000")
	}
	line := func(i int) string {
		h, op := of[i].r, ops[i]
		return fmt.Sprintf("  %s op [%s, %s] of %s call=%s check=%s rel=%s unlockOK=%v owner=%s deleted=[%s, %s] lost-grant=[%s, %s] lost=%v\n",
			of[i].what, stamp(op.Call), stamp(op.Return), h, stamp(h.Call), stamp(h.Check), stamp(h.Rel), h.UnlockOK, h.Owner,
			stamp(h.DelFrom), stamp(h.DelTo), stamp(h.LostFrom), stamp(h.LostTo), h.Lost)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "longest linearizable prefix: %d of %d operations; its last ones:\n", len(longest), len(ops))
	for _, i := range longest[max(0, len(longest)-4):] {
		b.WriteString(line(i))
	}
	// The operations left out that began before the prefix's end: one of them could not be
	// placed.
	var last int64
	if len(longest) > 0 {
		last = ops[longest[len(longest)-1]].Call
	}
	var left []int
	for i, op := range ops {
		if !placed[i] && op.Call <= last+int64(time.Second) {
			left = append(left, i)
		}
	}
	slices.SortFunc(left, func(x, y int) int { return cmp.Compare(ops[x].Call, ops[y].Call) })
	b.WriteString("not placed, begun by then:\n")
	for _, i := range left[:min(len(left), 8)] {
		b.WriteString(line(i))
	}
	return b.String()
}
