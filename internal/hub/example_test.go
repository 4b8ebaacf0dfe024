package hub_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/internal/hub"
	"github.com/relock-go/relock/internal/redistest"
)

// waitUntil polls cond, which the hub's goroutine makes true: the examples wait on what
// they can observe, never on a fixed sleep.
func waitUntil(what string, cond func() bool) {
	if !redistest.Await(30*time.Second, cond) {
		log.Fatalf("not within 30s: %s", what)
	}
}

func publishMessage(rc rueidis.Client, channel, message string) {
	if err := rc.Do(context.Background(), rc.B().Publish().Channel(channel).Message(message).Build()).Error(); err != nil {
		log.Fatal(err)
	}
}

// A waiter's protocol with the hub: subscribe, wait for the confirmation, try, then wait
// for a wake-up (bounded, here by ten seconds). Lock packages follow it; this shows it bare.
func ExampleHub() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	h := hub.New(rc, hub.Config{})
	defer h.Close()

	sub, err := h.Subscribe("redisson_lock__channel:{report}", hub.LockMessages, nil, hub.Registry{})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Release()
	// Ready returns at the confirmation; the bound only matters when the server is slow
	// to confirm, and then the message below could be missed.
	if err := sub.Ready(context.Background(), 10*time.Second); err != nil {
		log.Fatal(err)
	}
	// An unlock elsewhere publishes "0" on the lock's channel.
	rc.Do(context.Background(), rc.B().Publish().Channel("redisson_lock__channel:{report}").Message(hub.WakeOne).Build())
	err = sub.Wait(context.Background(), 10*time.Second)
	st := h.Stats()
	fmt.Println("woken:", err == nil, "by a message:", st.Woken == 1, "timed out:", st.TimedOut)
	// Output: woken: true by a message: true timed out: 0
}

// Two subscribers of one channel share one subscription. Wake-ups are counted as permits:
// one that arrives while nobody is parked is kept for a subscriber that is between two
// attempts, and WakeAll (a read unlock) wakes every parked waiter at once.
func ExampleSub() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	h := hub.New(rc, hub.Config{})
	defer h.Close()
	ctx := context.Background()
	const channel = "redisson_rwlock:{config}"

	a, err := h.Subscribe(channel, hub.LockMessages, nil, hub.Registry{})
	if err != nil {
		log.Fatal(err)
	}
	b, err := h.Subscribe(channel, hub.LockMessages, nil, hub.Registry{})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range []*hub.Sub{a, b} {
		if err := s.Ready(ctx, 10*time.Second); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("subscriptions:", h.Stats().Channels)

	// Nobody is parked when this unlock's message arrives: it is kept, and a's next wait
	// takes it at once.
	publishMessage(rc, channel, hub.WakeOne)
	waitUntil("the message", func() bool { return h.Stats().Messages == 1 })
	fmt.Println("a's wait takes the kept wake-up:", a.Wait(ctx, 10*time.Second) == nil)

	woken := make(chan error, 2)
	for _, s := range []*hub.Sub{a, b} {
		go func() { woken <- s.Wait(ctx, 10*time.Second) }()
	}
	waitUntil("both parked", func() bool { return h.Stats().Waiting == 2 })
	publishMessage(rc, channel, hub.WakeAll)
	both := true
	for range 2 {
		select {
		case err := <-woken:
			both = both && err == nil
		case <-time.After(30 * time.Second):
			log.Fatal("a parked waiter was not woken")
		}
	}
	fmt.Println("both woken:", both)

	a.Release()
	b.Release()
	waitUntil("the unsubscription", func() bool { return h.Stats().Channels == 0 })
	st := h.Stats()
	fmt.Println("woken:", st.Woken, "timed out:", st.TimedOut, "subscriptions left:", st.Channels)
	// Output:
	// subscriptions: 1
	// a's wait takes the kept wake-up: true
	// both woken: true
	// woken: 3 timed out: 0 subscriptions left: 0
}

// Stats tells why waits ended: a wake-up message, or the time bound (in a lock package the
// holder's remaining lease), which is all a waiter has when a message is lost.
func Example_stats() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	h := hub.New(rc, hub.Config{})
	defer h.Close()
	ctx := context.Background()
	const channel = "redisson_lock__channel:{report}"

	sub, err := h.Subscribe(channel, hub.LockMessages, nil, hub.Registry{})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Release()
	if err := sub.Ready(ctx, 10*time.Second); err != nil {
		log.Fatal(err)
	}

	// No unlock comes: the wait ends at its bound.
	if err := sub.Wait(ctx, 20*time.Millisecond); err != nil {
		log.Fatal(err)
	}
	// An unlock's message ends the next one.
	done := make(chan error, 1)
	go func() { done <- sub.Wait(ctx, 10*time.Second) }()
	waitUntil("the waiter parked", func() bool { return h.Stats().Waiting == 1 })
	publishMessage(rc, channel, hub.WakeOne)
	select {
	case err := <-done:
		if err != nil {
			log.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		log.Fatal("the parked waiter was not woken")
	}
	st := h.Stats()
	fmt.Printf("messages %d, woken %d, timed out %d, waiting %d\n", st.Messages, st.Woken, st.TimedOut, st.Waiting)
	// Output: messages 1, woken 1, timed out 1, waiting 0
}
