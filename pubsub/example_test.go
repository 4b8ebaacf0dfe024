package pubsub_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/relock-go/relock/embedded"
	"github.com/relock-go/relock/pubsub"
)

// A waiter's protocol with the hub: subscribe, wait for the confirmation, try, then wait
// for a wake-up (bounded, here by a second). Lock packages follow it; this shows it bare.
func ExampleHub() {
	srv, err := embedded.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rc := srv.Redis()
	hub := pubsub.New(rc, false)
	defer hub.Close()

	sub, err := hub.Subscribe("redisson_lock__channel:{report}")
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Release()
	if err := sub.Ready(context.Background(), time.Second); err != nil {
		log.Fatal(err)
	}
	// An unlock elsewhere publishes "0" on the lock's channel.
	rc.Do(context.Background(), rc.B().Publish().Channel("redisson_lock__channel:{report}").Message(pubsub.WakeOne).Build())
	err = sub.Wait(context.Background(), time.Second)
	st := hub.Stats()
	fmt.Println("woken:", err == nil, "by a message:", st.Woken == 1, "timed out:", st.TimedOut)
	// Output: woken: true by a message: true timed out: 0
}
