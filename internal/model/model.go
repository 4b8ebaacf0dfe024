// Package model is a reference model of relock's lock semantics, written plainly so that
// it can serve as their specification: who holds a lock and how many times, how long
// Redis keeps each hold (leases, renewals, the read-write lock's timeout keys), the fair
// lock's queue, and fencing tokens. Its test drives relock and the model side by side
// with seeded random operations and compares Redis and every hold's context with the
// model after every step.
//
// The model describes Redis's data, not relock's code: each operation is stated as the
// rule it must follow (the lease-truth rule of docs/design.md), and the test checks that
// Redis ends up where the rules say.
package model

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A span is an instant known to lie within [lo, hi]. On the controlled clock every
// instant is exact (lo == hi); on a real clock an event is only known to happen between
// the moment its request was sent and the moment its reply came back.
type span struct{ lo, hi time.Time }

func exact(t time.Time) span { return span{t, t} }

func (s span) add(d time.Duration) span { return span{s.lo.Add(d), s.hi.Add(d)} }

// copied is s as a script that ran within t leaves it when it copies it to a key (PTTL,
// then PEXPIRE of what it read): Redis's clock runs during a script (PTTL and PEXPIRE
// each read it), so a server held up between the two moves the copy later, by at most the
// time the script ran, which t bounds. Never earlier: a copy never ends sooner.
func (s span) copied(t span) span { return span{s.lo, s.hi.Add(t.hi.Sub(t.lo))} }

// later is the span of max(a, b).
func later(a, b span) span { return span{latest(a.lo, b.lo), latest(a.hi, b.hi)} }

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (s span) String() string {
	if s.lo.Equal(s.hi) {
		return s.lo.Format("15:04:05.000")
	}
	return s.lo.Format("15:04:05.000") + ".." + s.hi.Format("15:04:05.000")
}

// kind is a kind of lock.
type kind int

const (
	plainKind kind = iota // rlock: Redisson's RLock
	fairKind              // fairlock: FIFO
	rwKind                // rwlock: Redisson's RReadWriteLock
)

func (k kind) String() string { return [...]string{"plain", "fair", "rw"}[k] }

// side is which hold of an owner: the one hold of a mutex, or a read-write lock's read or
// write hold. Each side of an owner is one hash field and one hold context lineage.
type side int

const (
	whole side = iota
	read
	write
)

func (s side) String() string { return [...]string{"", "read", "write"}[s] }

// outcome is what an acquisition attempt gets.
type outcome int

const (
	granted outcome = iota
	locked          // another owner holds it (or, fair: others are queued first)
	upgrade         // a reader asked for the write lock: ErrUpgrade
)

func (o outcome) String() string { return [...]string{"granted", "locked", "upgrade"}[o] }

// lockKey is the lock's hash in Redis: field -> hold count, and for a read-write lock its
// mode. exp is when the key expires.
type lockKey struct {
	mode   string // rw: "read" or "write"
	fields map[string]int
	exp    span
}

// entry is a fair lock's queue entry. A live waiter refreshes its entry at least every
// refresh period, so it is never dropped; a dead one (its client crashed) runs out at its
// deadline, after which any script may skip it.
type entry struct {
	owner    string
	dead     bool
	deadline span // dead entries only: the zset score, learnt from Redis
}

// hold is an owner's hold of one side as its client knows it: from the acquisition that
// started it to its release, its loss, or the client's close. ctxs are the contexts
// relock returned for it (one per acquisition, some of them the same).
type hold struct {
	owner    string
	side     side
	renew    bool      // renewed by the watchdog: some acquisition had no WithLease
	deadline time.Time // the latest that a fixed lease promised (sent + lease); zero if none
	// keptBy is, for a write hold, its owner's read hold that was taken while the write
	// hold was held and is renewed: the read hold's renewals keep the shared hash, and
	// with it the write field, alive (and the client learns of a loss through them).
	keptBy *hold
	// keptUntil is, for a write hold whose keeping read hold was released, the latest its
	// client may take it to last: that read hold's last renewal plus a lease.
	keptUntil time.Time
	fenced    bool
	token     int64
	forced    *span // when ForceUnlock deleted the lock under it: it may take a while to learn
	ctxs      []context.Context
}

// waiter is an owner blocked in Lock.
type waiter struct {
	owner string
	side  side
	// since is when the waiter was first seen eligible without being granted.
	since time.Time
}

// model is the state of one lock: Redis's keys and each client's holds and waiters.
type model struct {
	kind    kind
	name    string
	lease   time.Duration // the watchdog timeout: the lease of holds taken without WithLease
	period  time.Duration // the watchdog renews every lease/3
	refresh time.Duration // fair: how often a waiter refreshes its queue entry
	slop    time.Duration // how late a renewal may run (0 on the controlled clock)

	lock  *lockKey
	reads map[string]map[int]span // rw: owner -> k -> expiry of its read timeout key k
	token int64                   // the fencing counter; 0 while the key does not exist
	queue []*entry                // fair: the waiters' queue, in arrival order

	holds   map[string]*hold   // by hash field
	waiters map[string]*waiter // by owner
	dead    map[string]bool    // owners whose client crashed
}

func newModel(k kind, name string, lease, refresh, slop time.Duration) *model {
	return &model{
		kind: k, name: name, lease: lease, period: lease / 3, refresh: refresh, slop: slop,
		reads:   map[string]map[int]span{},
		holds:   map[string]*hold{},
		waiters: map[string]*waiter{},
		dead:    map[string]bool{},
	}
}

// Key names (Redisson's layout; see docs/design.md).
func (m *model) tokenKey() string   { return "redisson_lock_token:{" + m.name + "}" }
func (m *model) queueKey() string   { return "redisson_lock_queue:{" + m.name + "}" }
func (m *model) timeoutKey() string { return "redisson_lock_timeout:{" + m.name + "}" }
func (m *model) readKey(owner string, k int) string {
	return "{" + m.name + "}:" + owner + ":rwlock_timeout:" + strconv.Itoa(k)
}

// field is the hash field that counts an owner's holds of a side.
func field(owner string, s side) string {
	if s == write {
		return owner + ":write"
	}
	return owner
}

// leaseOf is the lease an acquisition asks for: its fixed lease, or the watchdog's.
func (m *model) leaseOf(lease time.Duration) time.Duration {
	if lease == 0 {
		return m.lease
	}
	return lease
}

// advance brings the model to t: holds renewed by a live client's watchdog had their
// keys extended (a renewal extends to max(PTTL, lease), never less), and keys whose
// expiry has certainly passed are gone.
func (m *model) advance(t time.Time) {
	for _, h := range m.holds {
		if !h.renew || m.dead[h.owner] || m.lock == nil || m.lock.fields[field(h.owner, h.side)] == 0 {
			continue
		}
		// The watchdog renews every period, so the last renewal was at most a period
		// (and, on a real clock, its scheduling delay) ago, and at most now.
		renewed := span{t.Add(-m.period - m.slop), t}.add(m.lease)
		m.lock.exp = later(m.lock.exp, renewed)
		switch h.side {
		case read:
			// A reader's renewal extends its own timeout keys 1..n for its n holds, and
			// nobody else's (nor keys of its own above n, left from a deleted lock).
			for k, e := range m.reads[h.owner] {
				if k <= m.lock.fields[h.owner] {
					m.reads[h.owner][k] = later(e, renewed)
				}
			}
		case write:
			// Whether a write hold's renewal extends the writer's own read keys is not
			// specified: allow it without counting on it.
			for k, e := range m.reads[h.owner] {
				m.reads[h.owner][k] = span{e.lo, latest(e.hi, renewed.hi)}
			}
		}
	}
	m.expire(t)
}

// expire forgets every key whose expiry has certainly passed at t. A key may also be
// gone already if its expiry span reaches back to t; observe settles that.
func (m *model) expire(t time.Time) {
	if m.lock != nil && !m.lock.exp.hi.After(t) {
		m.lock = nil
	}
	for o, ks := range m.reads {
		for k, e := range ks {
			if !e.hi.After(t) {
				delete(ks, k)
			}
		}
		if len(ks) == 0 {
			delete(m.reads, o)
		}
	}
}

// readHeld reports whether owner certainly holds a read hold at t: its field counts n
// holds and its newest timeout key, n, is live. A field whose keys ran out is a hold that
// is gone (a reader asking for the write lock then waits rather than fail as an upgrade).
func (m *model) readHeld(owner string, t time.Time) bool {
	n := m.lock.fields[owner]
	e, ok := m.reads[owner][n]
	return n > 0 && ok && e.lo.After(t)
}

// readMaybeHeld reports whether owner's newest read key may still be live.
func (m *model) readMaybeHeld(owner string) bool {
	_, ok := m.reads[owner][m.lock.fields[owner]]
	return m.lock.fields[owner] > 0 && ok
}

// prunable reports whether a fair queue entry may be skipped at t: its waiter is dead and
// its deadline has passed. (A live waiter is never skipped, however long it waits.)
func (e *entry) prunable(t time.Time) bool { return e.dead && !e.deadline.hi.After(t) }

// queued returns the position of owner in the fair queue, or -1.
func (m *model) queued(owner string) int {
	for i, e := range m.queue {
		if e.owner == owner {
			return i
		}
	}
	return -1
}

// verdict is what an attempt by owner on side gets at t, by the rules of the lock's kind.
//
//   - A mutex (plain or fair) is taken when its key does not exist, and re-entered by the
//     owner that holds it.
//   - A fair mutex is taken only in turn: every queue entry before the owner's (all of
//     them for an owner not queued) must be a dead waiter whose entry ran out.
//   - A read hold is taken when the hash does not exist, in read mode, or by the writer
//     (downgrade). A write hold is taken when the hash does not exist, or re-entered by the
//     writer; an owner with read holds only gets ErrUpgrade.
func (m *model) verdict(owner string, s side, t time.Time) outcome {
	m.expire(t)
	f := field(owner, s)
	if m.lock != nil && m.lock.fields[f] > 0 && (s != read || m.lock.mode == "read" || m.lock.fields[field(owner, write)] > 0) {
		return granted // re-entry
	}
	switch s {
	case read:
		if m.lock == nil || m.lock.mode == "read" || m.lock.fields[field(owner, write)] > 0 {
			return granted
		}
		return locked
	case write:
		if m.lock == nil {
			return granted
		}
		if m.lock.mode == "read" && m.readHeld(owner, t) {
			return upgrade
		}
		return locked
	}
	if m.lock != nil {
		return locked
	}
	if m.kind == fairKind {
		for _, e := range m.queue {
			if e.owner == owner {
				break
			}
			if !e.prunable(t) {
				return locked
			}
		}
	}
	return granted
}

// check compares what an attempt got with the verdict. Where the model cannot tell (a
// read field whose timeout keys are all gone may still count as the owner's for an
// upgrade), it accepts either.
func (m *model) check(owner string, s side, t time.Time, got outcome) error {
	want := m.verdict(owner, s, t)
	if got == want {
		return nil
	}
	if s == write && m.lock != nil && m.lock.mode == "read" && m.lock.fields[owner] > 0 && m.readHeld(owner, t) != m.readMaybeHeld(owner) &&
		(got == upgrade || got == locked) {
		return nil // the owner's newest read key runs out about now
	}
	return fmt.Errorf("%s %s by %s got %s, the model says %s", m.kind, s, short(owner), got, want)
}

// grant applies an acquisition of side by owner at t with lease (0: the watchdog's),
// which the caller has checked against the verdict, and returns the client's hold.
//
//   - First-level: the key is created with the lease as its expiry, and a fenced
//     acquisition takes the next token (re-entry keeps the hold's token).
//   - Re-entry never shortens the key's expiry: it becomes max(expiry, t+lease).
//   - A read hold k of owner O gets timeout key k; all of O's timeout keys 1..k then share
//     one expiry, the longest promised to holds 1..k-1 or to k (a key of O's that ran out
//     is made again: O's count says it holds that many; a key above k, left from a lock
//     that was deleted under O, is no hold and is left alone), and the hash's expiry is at
//     least that.
//   - Fair: the owner and the dead entries before it leave the queue.
func (m *model) grant(owner string, s side, lease time.Duration, fenced bool, t span) *hold {
	m.expire(t.lo)
	f := field(owner, s)
	exp := t.add(m.leaseOf(lease))
	if m.lock == nil {
		m.lock = &lockKey{fields: map[string]int{}, exp: exp}
		switch s {
		case read:
			m.lock.mode = "read"
		case write:
			m.lock.mode = "write"
		}
	}
	m.lock.fields[f]++
	count := m.lock.fields[f]
	m.lock.exp = later(m.lock.exp.copied(t), exp)
	if s == read {
		ks := m.reads[owner]
		if ks == nil {
			ks = map[int]span{}
			m.reads[owner] = ks
		}
		shared := exp
		for k := 1; k < count; k++ {
			if e, ok := ks[k]; ok {
				shared = later(shared, e.copied(t))
			}
		}
		for k := 1; k <= count; k++ {
			ks[k] = shared
		}
		m.lock.exp = later(m.lock.exp, shared)
	}
	firstLevel := count == 1
	if m.kind == fairKind && firstLevel {
		if i := m.queued(owner); i >= 0 {
			m.queue = m.queue[i+1:]
		} else {
			m.queue = nil // every entry was a dead one that ran out (verdict)
		}
	}
	if firstLevel && fenced && s != read {
		m.token++
	}

	// The client's hold: a first-level acquisition starts one (a hold it still knew of is
	// gone in Redis, and ends); so does any acquisition when the client no longer knows of
	// a hold. Otherwise the acquisition joins the hold: renewal is on once any acquisition
	// asked for it, and the local deadline is the latest a fixed lease promised.
	h := m.holds[f]
	if h == nil || firstLevel {
		h = &hold{owner: owner, side: s, fenced: fenced && firstLevel && s != read}
		if h.fenced {
			h.token = m.token
		}
		m.holds[f] = h
	}
	if lease == 0 {
		h.renew = true
	} else {
		h.deadline = latest(h.deadline, t.lo.Add(lease))
	}
	// A read hold taken while its owner holds the write lock raises the hash's expiry,
	// which keeps the write field: the write hold lasts at least as long as it.
	if wh := m.holds[field(owner, write)]; s == read && wh != nil && m.lock.fields[field(owner, write)] > 0 {
		if lease == 0 {
			wh.keptBy = h
		} else {
			wh.deadline = latest(wh.deadline, t.lo.Add(lease))
		}
	}
	delete(m.waiters, owner)
	return h
}

// released is what an unlock did.
type released int

const (
	notHeld   released = iota // the owner held nothing: ErrNotHeld
	stillHeld                 // a partial release: the owner still holds
	let                       // the owner's last hold of this side is gone
)

// release applies an unlock of side by owner at t.
//
//   - Not held: nothing changes, ErrNotHeld.
//   - A partial release leaves the expiry alone.
//   - A full release of a mutex deletes the key; a fair lock's dead entries at the head
//     of the queue whose time ran out are skipped.
//   - A read release deletes the owner's newest timeout key. When holds remain, the hash's
//     expiry in read mode becomes the longest remaining live timeout key (Redisson's
//     rule); while a writer holds it is never shortened. No live timeout key left in read
//     mode: the hash is deleted.
//   - A write release that leaves the writer's read holds turns the lock to read mode,
//     with the expiry of its longest live timeout key.
func (m *model) release(owner string, s side, t span) released {
	m.expire(t.lo)
	f := field(owner, s)
	if m.lock == nil || m.lock.fields[f] == 0 {
		return notHeld
	}
	m.lock.fields[f]--
	n := m.lock.fields[f]
	if s == read {
		delete(m.reads[owner], n+1)
		if wh := m.holds[field(owner, write)]; n == 0 && wh != nil && wh.keptBy != nil {
			// The read hold's last renewal, at most a period ago, raised the hash's
			// expiry, and the write hold's end with it: Redis keeps it at least a lease
			// past that renewal, and the client takes it to last at most a lease past now.
			wh.deadline = latest(wh.deadline, t.lo.Add(m.lease-m.period-m.slop))
			wh.keptUntil = latest(wh.keptUntil, t.hi.Add(m.lease))
			wh.keptBy = nil
		}
	}
	if n == 0 {
		delete(m.lock.fields, f)
	}
	if s == whole {
		if n > 0 {
			return stillHeld
		}
		m.lock = nil
		m.skipDead(t.lo)
		return let
	}
	if len(m.lock.fields) == 0 {
		m.lock = nil
	} else {
		if s == write && n == 0 {
			m.lock.mode = "read"
		}
		longest, ok := m.longestRead()
		switch {
		case m.lock.mode == "write":
			if ok {
				m.lock.exp = later(m.lock.exp.copied(t), longest.copied(t))
			}
		case ok:
			m.lock.exp = longest.copied(t)
		default:
			m.lock = nil
		}
	}
	if n > 0 {
		return stillHeld
	}
	return let
}

// longestRead is the expiry of the longest live timeout key of the holds in the hash:
// keys 1..n of each field counting n holds.
func (m *model) longestRead() (span, bool) {
	var longest span
	ok := false
	for f, n := range m.lock.fields {
		for k, e := range m.reads[f] {
			if k <= n {
				longest, ok = later(longest, e), true
			}
		}
	}
	return longest, ok
}

// skipDead drops the dead entries at the head of a fair queue whose time ran out (the
// scripts do so when the lock is free: the turn passes).
func (m *model) skipDead(t time.Time) {
	for len(m.queue) > 0 && m.queue[0].prunable(t) {
		m.queue = m.queue[1:]
	}
}

// force applies ForceUnlock: the lock's key is deleted whoever holds it (the read
// timeout keys run out by themselves), and reports whether there was one. The holders
// learn of it at their next renewal, or at their fixed lease's end.
func (m *model) force(t span) bool {
	m.expire(t.lo)
	if m.lock == nil {
		return false
	}
	for f := range m.lock.fields {
		if h := m.holds[f]; h != nil && h.forced == nil {
			h.forced = &t
		}
	}
	m.lock = nil
	m.skipDead(t.lo)
	return true
}

// wait records that owner blocks in Lock: a fair lock's waiter joins the queue's tail.
func (m *model) wait(owner string, s side) {
	m.waiters[owner] = &waiter{owner: owner, side: s}
	if m.kind == fairKind && m.queued(owner) < 0 {
		m.queue = append(m.queue, &entry{owner: owner})
	}
}

// leave records that a waiter gave up (its context ended): a fair waiter leaves the queue
// at once, and if the lock is free the turn passes.
func (m *model) leave(owner string, t span) {
	delete(m.waiters, owner)
	if i := m.queued(owner); i >= 0 {
		m.queue = append(m.queue[:i:i], m.queue[i+1:]...)
		if m.lock == nil {
			m.skipDead(t.lo)
		}
	}
}

// crash records that an owner's client died at t: its holds are no longer renewed (their
// keys run out at the latest a lease after the last renewal), its waiters are gone, and
// a fair waiter's queue entry stays until its deadline, at most two refresh periods on.
func (m *model) crash(owner string, t span) {
	m.advance(t.hi)
	m.dead[owner] = true
	delete(m.waiters, owner)
	for f, h := range m.holds {
		if h.owner == owner {
			delete(m.holds, f)
		}
	}
	if i := m.queued(owner); i >= 0 {
		m.queue[i].dead = true
		m.queue[i].deadline = span{t.lo, t.hi.Add(2 * m.refresh)}
	}
}

// snapshot is everything Redis holds, read at once.
type snapshot struct {
	at   span
	keys map[string]*value
}

type value struct {
	typ  string
	pttl time.Duration // -1: no expiry
	hash map[string]string
	list []string
	zset map[string]time.Time // member -> score as an instant on the test's clock
	str  string
}

// observe compares Redis with the model and returns the differences. Where the model is
// unsure (a key whose expiry span includes now, a dead waiter's entry that may have been
// skipped), Redis settles it and the model learns the exact expiries it sees.
func (m *model) observe(s *snapshot) []string {
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	now := s.at
	seen := map[string]bool{}

	// expiry checks a key's PTTL against the model's span, and narrows the span to it.
	expiry := func(key string, v *value, want *span) {
		if v.pttl < 0 {
			badf("%s has no expiry; the model says it expires at %v", key, *want)
			return
		}
		got := span{now.lo.Add(v.pttl - m.tolerance()), now.hi.Add(v.pttl + m.tolerance())}
		if got.hi.Before(want.lo) {
			badf("%s expires at %v, earlier than the model's %v (PTTL %v)", key, got, *want, v.pttl)
		} else if got.lo.After(want.hi) {
			badf("%s expires at %v, later than the model's %v (PTTL %v)", key, got, *want, v.pttl)
		}
		*want = span{latest(got.lo, want.lo), earliest(got.hi, want.hi)}
		if want.hi.Before(want.lo) {
			*want = got
		}
	}
	// present settles whether a key the model has, with expiry e, should be in Redis.
	present := func(key string, e span) (v *value, keep bool) {
		v = s.keys[key]
		seen[key] = true
		switch {
		case v == nil && e.lo.After(now.hi):
			badf("%s is missing; the model says it expires at %v", key, e)
			return nil, false
		case v == nil:
			return nil, false // ran out, as it may have by now
		case !e.hi.After(now.lo):
			badf("%s is still there; the model says it expired at %v", key, e)
		}
		return v, true
	}

	if m.lock != nil {
		v, keep := present(m.name, m.lock.exp)
		if !keep {
			m.lock = nil
		} else {
			want := map[string]string{}
			for f, n := range m.lock.fields {
				want[f] = strconv.Itoa(n)
			}
			if m.lock.mode != "" {
				want["mode"] = m.lock.mode
			}
			if v.typ != "hash" || !sameMap(v.hash, want) {
				badf("%s is %s %v; the model says %v", m.name, v.typ, v.hash, want)
			}
			expiry(m.name, v, &m.lock.exp)
		}
	}
	for o, ks := range m.reads {
		for k, e := range ks {
			key := m.readKey(o, k)
			v, keep := present(key, e)
			if !keep {
				delete(ks, k)
				continue
			}
			expiry(key, v, &e)
			ks[k] = e
		}
		if len(ks) == 0 {
			delete(m.reads, o)
		}
	}
	if m.token > 0 {
		seen[m.tokenKey()] = true
		if v := s.keys[m.tokenKey()]; v == nil || v.str != strconv.FormatInt(m.token, 10) || v.pttl >= 0 {
			badf("the fencing counter is %+v; the model says %d without expiry", v, m.token)
		}
	}
	if m.kind == fairKind {
		bad = append(bad, m.observeQueue(s, seen)...)
	}
	bad = append(bad, m.observeWake(s, seen)...)
	for k := range s.keys {
		if !seen[k] {
			badf("unexpected key %s: %+v", k, *s.keys[k])
		}
	}
	return bad
}

// observeQueue compares a fair lock's queue. Redis's queue is the model's, less dead
// entries at its head that ran out and were skipped; the deadlines zset has one entry per
// queued owner, a live waiter's in the future.
// observeWake checks the wake registries (lua/wake.lua), which the model does not follow
// entry by entry: which clients they name is an optimisation of who is woken, never a
// matter of who holds. Each must be a zset of wake codes (decimal numbers of at least
// 1000) that expires within its life: a lease (the driver's longest is twice the
// watchdog's) and a second. The fair lock has none.
func (m *model) observeWake(s *snapshot, seen map[string]bool) []string {
	var bad []string
	life := 2*m.lease + time.Second + m.slop
	for _, k := range []string{"relock_wake:{" + m.name + "}", "relock_wake_readers:{" + m.name + "}"} {
		v := s.keys[k]
		if v == nil {
			continue
		}
		seen[k] = true
		if m.kind == fairKind || v.typ != "zset" || v.pttl <= 0 || v.pttl > life {
			bad = append(bad, fmt.Sprintf("wake registry %s: %+v; want a zset that expires within %v, and none for a fair lock", k, *v, life))
			continue
		}
		for code := range v.zset {
			if n, err := strconv.ParseUint(code, 10, 64); err != nil || n < 1000 {
				bad = append(bad, fmt.Sprintf("wake registry %s: entry %q; want a wake code", k, code))
			}
		}
	}
	return bad
}

func (m *model) observeQueue(s *snapshot, seen map[string]bool) []string {
	var bad []string
	seen[m.queueKey()], seen[m.timeoutKey()] = true, true
	var list []string
	if v := s.keys[m.queueKey()]; v != nil {
		list = v.list
	}
	skipped := -1
	for i := 0; i <= len(m.queue); i++ {
		if i > 0 && !m.queue[i-1].prunable(s.at.hi) {
			break
		}
		if len(m.queue)-i == len(list) && sameOwners(m.queue[i:], list) {
			skipped = i
			break
		}
	}
	if skipped < 0 {
		return append(bad, fmt.Sprintf("the fair queue is %v; the model says %v", shorts(list), m.queue))
	}
	m.queue = m.queue[skipped:]
	var zset map[string]time.Time
	if v := s.keys[m.timeoutKey()]; v != nil {
		zset = v.zset
	}
	if len(zset) != len(list) {
		bad = append(bad, fmt.Sprintf("the fair queue's deadlines %v do not match the queue %v", zset, shorts(list)))
	}
	for _, e := range m.queue {
		d, ok := zset[e.owner]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("queued %s has no deadline", short(e.owner)))
		case !e.dead && !d.After(s.at.hi):
			bad = append(bad, fmt.Sprintf("live waiter %s's entry ran out at %v: a live waiter must never be evicted", short(e.owner), d))
		case e.dead:
			e.deadline = span{d, d.Add(m.tolerance())}
		}
	}
	for _, k := range []string{m.queueKey(), m.timeoutKey()} {
		if v := s.keys[k]; v != nil && v.pttl < 0 {
			bad = append(bad, k+" has no expiry")
		}
	}
	return bad
}

// tolerance is how far an expiry read from Redis may be off either way: nothing on the
// controlled clock; on a real one, Redis counts whole milliseconds of its own clock, both
// when it sets an expiry and when it answers PTTL.
func (m *model) tolerance() time.Duration {
	if m.slop == 0 {
		return 0
	}
	return 2 * time.Millisecond
}

// held reports from a snapshot whether Redis keeps owner's hold of side, and until when:
// the field exists in the lock's hash (and for a read hold, the owner's newest timeout
// key is live), with the earliest of the hash's and the timeout key's expiries.
func (m *model) held(s *snapshot, owner string, sd side) (bool, span) {
	v := s.keys[m.name]
	if v == nil || v.typ != "hash" || v.hash[field(owner, sd)] == "" || v.pttl < 0 {
		return false, span{}
	}
	exp := span{s.at.lo.Add(v.pttl - m.tolerance()), s.at.hi.Add(v.pttl + m.tolerance())}
	if sd != read {
		return true, exp
	}
	// A read hold lives while its newest timeout key does (all of an owner's keys share
	// one expiry).
	n, _ := strconv.Atoi(v.hash[owner])
	kv := s.keys[m.readKey(owner, n)]
	if kv == nil || kv.pttl < 0 {
		return false, span{}
	}
	if e := (span{s.at.lo.Add(kv.pttl - m.tolerance()), s.at.hi.Add(kv.pttl + m.tolerance())}); e.hi.Before(exp.hi) {
		exp = e
	}
	return true, exp
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func sameOwners(q []*entry, list []string) bool {
	for i, e := range q {
		if e.owner != list[i] {
			return false
		}
	}
	return true
}

func (e *entry) String() string {
	if e.dead {
		return short(e.owner) + "(dead until " + e.deadline.String() + ")"
	}
	return short(e.owner)
}

// short abbreviates every client uuid in s (an owner, a field, a key) to its first 4
// characters.
func short(s string) string {
	return uuidPattern.ReplaceAllStringFunc(s, func(u string) string { return u[:4] })
}

var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func shorts(owners []string) []string {
	out := make([]string, len(owners))
	for i, o := range owners {
		out[i] = short(o)
	}
	return out
}

// describe prints the model's state, for a failure report.
func (m *model) describe() string {
	var b strings.Builder
	if m.lock == nil {
		b.WriteString("lock: none")
	} else {
		fs := make([]string, 0, len(m.lock.fields))
		for f, n := range m.lock.fields {
			fs = append(fs, fmt.Sprintf("%s=%d", short(f), n))
		}
		sort.Strings(fs)
		fmt.Fprintf(&b, "lock: mode=%q %v expires %v", m.lock.mode, fs, m.lock.exp)
	}
	for o, ks := range m.reads {
		for k, e := range ks {
			fmt.Fprintf(&b, "; read key %s:%d expires %v", short(o), k, e)
		}
	}
	if m.token > 0 {
		fmt.Fprintf(&b, "; token %d", m.token)
	}
	if len(m.queue) > 0 {
		fmt.Fprintf(&b, "; queue %v", m.queue)
	}
	for f, h := range m.holds {
		fmt.Fprintf(&b, "; hold %s renew=%v deadline=%s", short(f), h.renew, h.deadline.Format("15:04:05.000"))
	}
	for o := range m.waiters {
		fmt.Fprintf(&b, "; waiting %s", short(o))
	}
	return b.String()
}

// bindLock is the lock the test takes once per owner to bind it to a context.
const bindLock = "model-bind"
