package pubsub

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// runSharded is run's counterpart for sharded pub/sub (Redis Cluster, Redis 7+): classic
// PUBLISH is broadcast to every node of a cluster, SPUBLISH only reaches the shard that
// owns the channel's slot. Each wanted channel gets a receiver that subscribes it with
// SSUBSCRIBE on that shard's node (rueidis routes by slot) and subscribes again after a
// failover, a slot move or a dropped connection.
func (h *Hub) runSharded() {
	defer close(h.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		h.mu.Lock()
		for name, c := range h.chans {
			if c.refs > 0 && c.stop == nil {
				ctx, cancel := context.WithCancel(h.ctx)
				c.stop = cancel
				wg.Add(1)
				go func() {
					defer wg.Done()
					h.receive(ctx, name, c)
				}()
			} else if c.refs == 0 && c.stop != nil {
				c.stop() // the receiver removes the channel once it has let go
			}
		}
		h.mu.Unlock()
		select {
		case <-h.kick:
		case <-h.ctx.Done():
			return
		}
	}
}

// receive keeps one channel subscribed until ctx ends.
func (h *Hub) receive(ctx context.Context, name string, c *channel) {
	delay := minBackoff
	for ctx.Err() == nil {
		start := time.Now()
		rctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			if s.Channel != name {
				return
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			switch s.Kind {
			case "ssubscribe":
				h.confirm(c)
			case "sunsubscribe":
				// The slot moved or the shard failed over: Receive returns, and the
				// channel is subscribed again where it lives now.
				c.lost = true
				c.unconfirm()
			}
		})
		rctx = rueidis.WithOnReceiveReturnHook(rctx, func(err error, cc rueidis.CommandClient) error {
			if ctx.Err() != nil {
				// Released or closed: rueidis keeps the node's connection subscribed
				// unless told, and that connection carries other traffic too.
				uctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = cc.Do(uctx, cc.B().Sunsubscribe().Channel(name).Build()).Error()
				cancel()
			}
			return err
		})
		_ = h.rc.Receive(rctx, h.rc.B().Ssubscribe().Channel(name).Build(), h.onMessage)
		if ctx.Err() != nil {
			break
		}
		h.mu.Lock()
		c.lost = true
		c.unconfirm()
		h.mu.Unlock()
		h.reconnects.Add(1)
		if time.Since(start) > maxBackoff {
			delay = minBackoff
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		delay = min(2*delay, maxBackoff)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c.stop = nil
	c.unconfirm()
	if c.refs > 0 {
		h.poke() // wanted again while this receiver was letting go
	} else {
		delete(h.chans, name)
	}
}
