package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A detached call's context ends at the client's timeout, give or take one grain, however
// long the client has been running: its Deadline says when, and its Done and Err keep to
// it. (The client here started an hour ago.)
func TestDeadlinesEndAtTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ds := newDeadlines(timeout)
	ds.base = ds.base.Add(-time.Hour)
	for range 3 * deadlineShards { // every shard, and each made or reused
		start := time.Now()
		d := ds.next()
		at, ok := d.Deadline()
		if !ok {
			t.Fatal("a detached call's context has no deadline")
		}
		if left := at.Sub(start); left < timeout || left > timeout+ds.grain+time.Second {
			t.Fatalf("deadline %v after the call, want between the timeout %v and a grain (%v) more", left, timeout, ds.grain)
		}
	}
	d := ds.next()
	if d.Err() != nil {
		t.Fatalf("a new deadline has ended: %v", d.Err())
	}
	at, _ := d.Deadline()
	select {
	case <-d.Done():
	case <-time.After(time.Until(at) + 10*time.Second): // room for a loaded machine
		t.Fatalf("Done not closed 10s after the deadline")
	}
	if !errors.Is(d.Err(), context.DeadlineExceeded) {
		t.Errorf("Err after Done: %v, want context.DeadlineExceeded", d.Err())
	}
	if early := time.Until(at); early > 0 {
		t.Errorf("Done closed %v before the deadline", early)
	}
	// A call after that one ended gets a deadline of its own, not the ended one.
	start := time.Now()
	next := ds.next()
	if at, _ := next.Deadline(); at.Sub(start) < timeout || next.Err() != nil {
		t.Errorf("a call after a deadline ended got one %v after it (err %v), want at least the timeout %v", at.Sub(start), next.Err(), timeout)
	}
}

// A deadline is shared only by calls it still leaves the whole timeout: a call made when a
// shard's current deadline has run half its time gets one of its own, at least the timeout
// from the call, not what is left of the shared one.
func TestSharedDeadlineLeavesTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ds := newDeadlines(timeout)
	for range deadlineShards { // a current deadline in every shard
		ds.next()
	}
	time.Sleep(timeout / 2)
	for range 2 * deadlineShards {
		start := time.Now()
		at, _ := ds.next().Deadline()
		if left := at.Sub(start); left < timeout {
			t.Fatalf("a call got a deadline %v after it, want at least the timeout %v", left, timeout)
		}
	}
}

// A detached call's context keeps the caller's values (what rueidis's hooks and tracing
// read from a call's context) and drops its cancellation: cancelled, or past its own
// deadline, the caller's context leaves the detached one live, ending at the client's
// timeout. A context with no values gets the shared deadline itself; one with values and
// no cancellation of its own keeps its values all the same. Guards against a Detached that
// takes a context that cannot end for one with nothing to keep.
func TestDetachedKeepsValuesNotCancellation(t *testing.T) {
	const timeout = time.Minute
	c := &Client{Timeout: timeout, deadlines: newDeadlines(timeout)}
	type key struct{}
	for _, detach := range []struct {
		name string
		f    func(context.Context) context.Context
	}{
		{"Detached", c.Detached},
		{"DetachInto", func(ctx context.Context) context.Context { return c.DetachInto(new(Detached), ctx) }},
	} {
		t.Run(detach.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Nanosecond)
			cancel()
			start := time.Now()
			d := detach.f(ctx)
			if v := d.Value(key{}); v != "v" {
				t.Errorf("the detached context's value = %v, want the caller's %q", v, "v")
			}
			if err := d.Err(); err != nil {
				t.Errorf("the detached context of a cancelled one has ended: %v", err)
			}
			select {
			case <-d.Done():
				t.Error("the detached context of a cancelled one is done")
			default:
			}
			if at, ok := d.Deadline(); !ok || at.Sub(start) < timeout {
				t.Errorf("the detached context's deadline is %v after the call (%v), want at least the client's timeout %v", at.Sub(start), ok, timeout)
			}
			if d := detach.f(context.Background()); d.Value(key{}) != nil {
				t.Errorf("the detached context of Background has a value")
			}
			// A context with values and no cancellation at all keeps them too.
			if d := detach.f(context.WithValue(context.Background(), key{}, "w")); d.Value(key{}) != "w" {
				t.Errorf("the detached context of one that is never cancelled: value %v, want the caller's %q", d.Value(key{}), "w")
			}
		})
	}
}

// WithTimeout bounds each detached call: its context ends no later than the timeout after
// the call plus one grain, a sixteenth of the timeout (at least a millisecond), whether the
// call makes a deadline or shares one made earlier. Guards against a grain that stretches
// the bound by as much as the timeout again.
func TestDetachedEndsWithinAGrainOfTheTimeout(t *testing.T) {
	for _, timeout := range []time.Duration{time.Minute, 5 * time.Millisecond} {
		c := &Client{Timeout: timeout, deadlines: newDeadlines(timeout)}
		grain := max(timeout/16, time.Millisecond)
		for range 3 * deadlineShards { // every shard, and each made or reused
			d := c.Detached(context.Background())
			after := time.Now()
			at, _ := d.Deadline()
			if over := at.Sub(after) - timeout; over > grain {
				t.Fatalf("timeout %v: a detached call's context ends %v after the timeout; want at most a grain, %v", timeout, over, grain)
			}
		}
	}
}
