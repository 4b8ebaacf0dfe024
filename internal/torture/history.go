// Package torture holds the fault-injection torture test of relock's locks (the reentrant
// mutex, the fair lock and the read-write lock) and the history checkers it uses. The test
// itself is in torture_test.go.
package torture

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
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
}

// Held reports whether the record is an acquisition.
func (r Record) Held() bool { return !r.Hello && !r.Done && r.LockErr == "" && r.Acq != 0 }

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
func Overlaps(history []Record) [][2]Record {
	byLock := map[string][]Record{}
	var locks []string
	for _, r := range Holds(history) {
		if !r.Live {
			continue
		}
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
//
// A lock that lets two live sections overlap, or grants a hold while another is live,
// has no linearization: both Acquires are forced before either Release. Tokens that do
// not grow in the order of acquisition are refused by the same step.
type lockInput struct {
	Acquire bool
	Owner   int
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
			if s.Holder != -1 || t <= s.Last {
				return false, s
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
		if in.Acquire {
			return fmt.Sprintf("acquire(%d) -> %v", in.Owner, output)
		}
		return fmt.Sprintf("release(%d)", in.Owner)
	},
}

// Operations turns the exclusive acquisitions of history, which must be one lock's, into
// porcupine operations on LockModel; read holds are left out.
func Operations(history []Record) []porcupine.Operation {
	var hs []Record
	for _, h := range Holds(history) {
		if !h.Read() {
			hs = append(hs, h)
		}
	}
	end := int64(math.MaxInt64 / 2)
	var ops []porcupine.Operation
	for i, h := range hs {
		client := i
		ops = append(ops, porcupine.Operation{
			ClientId: client, Input: lockInput{Acquire: true, Owner: i}, Call: h.Call, Output: h.Token, Return: h.Acq,
		})
		call, ret := h.End, h.Rel
		if !h.Live {
			call = h.Call
		}
		if !h.UnlockOK {
			ret = end
		}
		ops = append(ops, porcupine.Operation{
			ClientId: client, Input: lockInput{Owner: i}, Call: call, Return: ret,
		})
	}
	return ops
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
			if r.Live {
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
