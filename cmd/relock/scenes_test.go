package main

import (
	"context"
	"io"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/keys"
	"github.com/relock-go/relock/internal/redistest"
)

// The fair-lock scene is the one that reads a lock's derived keys itself: it watches the
// queue to let each worker take its place before the next arrives. On a name with a hash
// tag of its own, "user{7}:cart", the queue is "redisson_lock_queue:user{7}:cart"; a
// queue key built by wrapping the name in a tag again, "redisson_lock_queue:{user{7}:cart}",
// stays empty, and the scene gives up waiting for its first worker to join it. This test
// runs the scene on that name and checks that every key that appears while it runs is
// one of the lock's own (the lock, its queue, its deadlines), that the queue was used, and
// that nothing is left afterwards.
func TestFairSceneOnTaggedName(t *testing.T) {
	const name = "user{7}:cart"
	names := keys.Of(name)
	if names.Queue != "redisson_lock_queue:user{7}:cart" {
		t.Fatalf("keys.Of(%q).Queue = %q; the name's own tag must be kept", name, names.Queue)
	}
	own := func(k string) bool {
		return k == name || k == names.Queue || k == names.Deadlines
	}
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		env, err := openDemo(b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer env.close()

		// Poll KEYS * while the scene runs; the queue lives for as long as workers wait.
		rc := b.Client(t)
		seen := map[string]bool{}
		var pollErr error
		stop := make(chan struct{})
		var polled sync.WaitGroup
		polled.Add(1)
		go func() {
			defer polled.Done()
			for {
				ks, err := rc.Do(context.Background(), rc.B().Keys().Pattern("*").Build()).AsStrSlice()
				if err != nil {
					pollErr = err
					return
				}
				for _, k := range ks {
					seen[k] = true
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = fairOrder(ctx, env, name, io.Discard)
		close(stop)
		polled.Wait()
		if err != nil {
			t.Fatalf("fair-lock scene on %q: %v", name, err)
		}
		if pollErr != nil {
			t.Fatalf("KEYS *: %v", pollErr)
		}
		if !seen[names.Queue] {
			t.Errorf("the queue %q never appeared; keys seen: %q", names.Queue, slices.Sorted(maps.Keys(seen)))
		}
		for k := range seen {
			if !own(k) {
				t.Errorf("key %q appeared while the scene ran on %q; it is not one of the lock's", k, name)
			}
		}
		left, err := rc.Do(ctx, rc.B().Keys().Pattern("*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range left {
			t.Errorf("key %q is left after the scene", k)
		}
	})
}
