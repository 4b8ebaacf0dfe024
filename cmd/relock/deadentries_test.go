package main

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
)

// A waiter whose queue entry ran out (its process died, or stopped refreshing) is taken
// for dead and skipped by the lock; inspect shows it so, with its expiry at or below 0 in
// JSON, beside a live one, both for a fair lock's queue and for an rwlock's waiting
// writers. The entries are written by hand, with deadlines in Redis's time as the scripts
// write them. Guards against a dead entry shown as live with a negative time left.
func TestInspectShowsDeadEntries(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const holder, dead, live = "8ce4dd22-0910-49c7-b869-e88df461c8f0:1", "5b0e0f4c-93d1-4d7e-a0f2-1a3c6f1b2d9e:2", "4592ed85-2bd0-4ad7-b1f2-520f1279896b:3"
		now := redistest.Millis(t, rc)
		past, future := strconv.FormatInt(now-5000, 10), strconv.FormatInt(now+50000, 10)

		fair := keys.Of("dead-queue")
		redistest.MustDo(t, rc, "HSET", "dead-queue", holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", "dead-queue", "60000")
		redistest.MustDo(t, rc, "RPUSH", fair.Queue, dead, live)
		redistest.MustDo(t, rc, "ZADD", fair.Deadlines, past, dead, future, live)
		r := inspectJSON(t, b.Addr, "dead-queue")
		if r.Kind != "fairlock" || len(r.Queue) != 2 || r.Queue[0].Owner != dead || r.Queue[0].ExpiresInMs > 0 || r.Queue[1].ExpiresInMs <= 0 {
			t.Errorf("inspect --json of a fair lock with a dead waiter first: %+v; want the dead entry's expiry at or below 0, the live one's above", r)
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "dead-queue")
		if err != nil || !regexp.MustCompile(`\n  queue 1  `+dead+` +dead \(entry expired\), will be skipped;.*\n  queue 2  `+live+` +live, entry expires in `).MatchString(out) {
			t.Errorf("inspect of a fair lock with a dead waiter first: %v; want it shown dead, the next live:\n%s", err, out)
		}

		rw := keys.Of("dead-writer")
		redistest.MustDo(t, rc, "HSET", "dead-writer", "mode", "read", holder, "1")
		redistest.MustDo(t, rc, "PEXPIRE", "dead-writer", "60000")
		redistest.MustDo(t, rc, "ZADD", rw.Writers, past, dead+":write", future, live+":write")
		r = inspectJSON(t, b.Addr, "dead-writer")
		if r.Kind != "rwlock" || len(r.Writers) != 2 || r.Writers[0].Owner != dead || r.Writers[0].ExpiresInMs > 0 || r.Writers[1].ExpiresInMs <= 0 {
			t.Errorf("inspect --json of an rwlock with a dead waiting writer: %+v; want its expiry at or below 0, the live one's above", r)
		}
		out, err = relockCmd(t, b.Addr, "", "inspect", "dead-writer")
		if err != nil || !regexp.MustCompile(`\n  writer   `+dead+` +dead \(entry expired\), ignored;.*\n  writer   `+live+` +waits \(new readers give way\), entry expires in `).MatchString(out) {
			t.Errorf("inspect of an rwlock with a dead waiting writer: %v; want it shown dead, the other waiting:\n%s", err, out)
		}
	})
}

// Between a waiting writer's turn coming and its taking the lock, an rwlock with writer
// preference is its waiting writers alone, with no hash: inspect shows it as an rwlock,
// free, with its writers queued, not as a name with no key, and unlock --force has nothing
// to do and changes nothing. Guards against the writers' registry read only beside a
// hash.
func TestInspectWritersAloneAreAnRWLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		const writer = "5b0e0f4c-93d1-4d7e-a0f2-1a3c6f1b2d9e:2"
		writers := keys.Of("turn").Writers
		redistest.MustDo(t, rc, "ZADD", writers, strconv.FormatInt(redistest.Millis(t, rc)+50000, 10), writer+":write")
		redistest.MustDo(t, rc, "PEXPIRE", writers, "60000")
		r := inspectJSON(t, b.Addr, "turn")
		if r.Kind != "rwlock" || r.Locked || len(r.Owners) != 0 || len(r.Writers) != 1 || r.Writers[0].Owner != writer || r.Writers[0].ExpiresInMs <= 0 {
			t.Errorf("inspect --json of an rwlock's waiting writer alone: %+v; want an rwlock, free, with the writer waiting", r)
		}
		out, err := relockCmd(t, b.Addr, "", "inspect", "turn")
		if err != nil || !regexp.MustCompile(`^turn: rwlock, free, waiters queued\n  writer   `+writer+` +waits \(new readers give way\)`).MatchString(out) {
			t.Errorf("inspect of an rwlock's waiting writer alone: %v; want an rwlock, free, with the writer waiting:\n%s", err, out)
		}
		before := redistest.Snapshot(t, rc, writers)
		out, err = relockCmd(t, b.Addr, "", "unlock", "--force", "-y", "turn")
		if err != nil || out != "turn is not held; nothing to do\n" {
			t.Errorf("unlock --force -y of an rwlock's waiting writer alone: %v, %q; want nothing to do", err, out)
		}
		if after := redistest.Snapshot(t, rc, writers); after != before {
			t.Errorf("unlock --force changed the waiting writers:\nbefore %s\nafter  %s", before, after)
		}
	})
}
