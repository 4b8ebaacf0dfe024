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

// The semaphore scene counts with a semaphore of its own: one that is already there (a
// Java service's count, a string of somebody else's) is not its to use or to delete. The
// scene refuses it, saying why, and the key is left as it was; a key of another type is
// refused by the library, and left as it was too.
//
// Guards against a scene that deletes its key on the way out whatever it found there.
func TestPermitsSceneLeavesOthersKeys(t *testing.T) {
	const name = "relock-demo:builds"
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		ctx := redistest.Context(t, 30*time.Second)
		for _, v := range []string{"7", "hello"} {
			redistest.MustDo(t, rc, "SET", name, v)
			env, err := openDemo(b.Addr)
			if err != nil {
				t.Fatal(err)
			}
			err = permitsScene(ctx, env, io.Discard)
			env.close()
			if err == nil {
				t.Errorf("the scene ran on %q holding %q", name, v)
			}
			got, gerr := rc.Do(ctx, rc.B().Get().Key(name).Build()).ToString()
			if gerr != nil || got != v {
				t.Errorf("after the scene (%v), %q = %q, %v; want %q left as it was", err, name, got, gerr, v)
			}
		}
	})
}
