package hub

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/bound"
	"github.com/relock-go/relock/internal/keys"
)

const (
	// routeTimeout bounds the CLUSTER SLOTS query that finds a channel's shard and the
	// ROLE query that checks it, and the SUNSUBSCRIBE sent when a receiver lets go.
	routeTimeout = time.Second
	// subscribeTimeout bounds a subscription attempt until it is confirmed and checked. A
	// node client keeps redialling its one address, so an attempt aimed at a node that has
	// died would otherwise never end; once it ends, the channel's node is looked up again.
	subscribeTimeout = 3 * time.Second
	// learnTimeout bounds the wait for the client to connect to a master it did not know,
	// polled every learnPoll. rueidis refreshes its slot map within a second of a
	// redirection.
	learnTimeout = 3 * time.Second
	learnPoll    = 20 * time.Millisecond
)

// runSharded is run's counterpart for sharded pub/sub (Redis Cluster, Redis 7+): classic
// PUBLISH is broadcast to every node of a cluster, SPUBLISH only reaches the shard that
// owns the channel's slot. Each wanted channel gets a receiver that subscribes it with
// SSUBSCRIBE on that shard's master and subscribes again after a failover, a slot move or
// a dropped connection.
func (h *Hub) runSharded() {
	defer close(h.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	r := newRouter(h.rc)
	if h.name != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.beacon()
		}()
	}
	lingered := time.NewTimer(time.Hour)
	defer lingered.Stop()
	for {
		h.passOn()
		var next time.Time
		var ending []*channel
		var regs []Registry
		now := time.Now()
		h.mu.Lock()
		for name, c := range h.chans {
			switch {
			case c.refs > 0 && c.stop == nil:
				ctx, cancel := context.WithCancel(h.ctx)
				c.stop = cancel
				wg.Add(1)
				go func() {
					defer wg.Done()
					h.receive(ctx, name, c, r)
				}()
			case c.refs == 0 && c.stop == nil:
				h.drop(name, c) // released before its receiver started
			case c.refs == 0 && now.Before(c.idle):
				next = earliest(next, c.idle) // lingering: the receiver stays
			case c.refs == 0:
				ending = append(ending, c)
				regs = append(regs, c.reg)
			}
		}
		h.mu.Unlock()
		if len(ending) > 0 {
			// Out of the registries first, so that no unlock picks this client once it no
			// longer hears the channel; a code that comes meanwhile is passed on.
			h.unregister(regs)
			h.mu.Lock()
			for _, c := range ending {
				switch {
				case c.stop == nil:
					// Its receiver ended meanwhile, and removed it.
				case c.refs == 0:
					c.stop() // the receiver removes the channel once it has let go
				default:
					// A subscriber came back while the client left the registries: it
					// must not take the channel for quiet, and registers again.
					c.heard = h.clock.Add(1)
				}
			}
			h.mu.Unlock()
		}
		var linger <-chan time.Time
		if !next.IsZero() {
			lingered.Reset(time.Until(next))
			linger = lingered.C
		}
		select {
		case <-h.kick:
		case <-linger:
		case <-h.ctx.Done():
			return
		}
	}
}

// beaconPing is how often the beacon's connection is checked, and remade when it was lost.
const beaconPing = 10 * time.Second

// beacon keeps one idle connection named after the client (Config.Name) on one node, made
// again when it is lost, until the hub closes. Sharded, the receivers use the rueidis
// client's shared pub/sub connections, which cannot be named, and an operator must still
// find the process behind an owner or a wake code in CLIENT LIST.
func (h *Hub) beacon() {
	t := time.NewTimer(0)
	defer t.Stop()
	var dc rueidis.DedicatedClient
	for {
		select {
		case <-t.C:
		case <-h.ctx.Done():
			if dc != nil {
				dc.Close()
			}
			return
		}
		if dc != nil && dc.Do(h.ctx, dc.B().Ping().Build()).Error() != nil {
			dc.Close()
			dc = nil
		}
		if dc == nil {
			dc, _ = h.subscriber().Dedicate()
			if dc.Do(h.ctx, dc.B().ClientSetname().ConnectionName(h.name).Build()).Error() != nil {
				dc.Close() // tried again at the next ping
				dc = nil
			}
		}
		t.Reset(beaconPing)
	}
}

// receive keeps one channel subscribed until ctx ends.
func (h *Hub) receive(ctx context.Context, name string, c *channel, r *router) {
	delay := minBackoff
	for ctx.Err() == nil {
		start := time.Now()
		gen, cause := h.subscribeOnce(ctx, name, c, r)
		if ctx.Err() != nil {
			break
		}
		h.mu.Lock()
		c.lost = true
		c.unconfirm()
		h.mu.Unlock()
		// The subscription ended while wanted: the shard may have moved, so the next
		// attempt asks the cluster where it lives now.
		r.forget(gen)
		delay = h.backOff(ctx, start, delay, cause)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c.stop = nil
	c.unconfirm()
	if c.refs > 0 {
		h.poke() // wanted again while this receiver was letting go
	} else {
		h.drop(name, c)
	}
}

// subscribeOnce subscribes name and receives its messages until the subscription ends: the
// server dropped it (slot moved, failover), the connection broke, the node turned out not
// to be the shard's master, or ctx ended.
//
// The subscription goes to the master that the cluster itself names, not to where the
// rueidis client routes the slot: after a failover the client's slot map still points at
// the old master for a while, and that node, now a replica of the new one, accepts
// SSUBSCRIBE. The new master forwards its shard's messages only to the replicas it knows
// of, which it learns by gossip up to a second later, so an unlock published meanwhile
// would be lost and its waiters would sleep until the lock's TTL ran out. Hence also the
// ROLE check before the subscription counts as confirmed.
//
// It returns the generation of the slot map it routed by, for router.forget, and what
// ended the subscription when it knows.
func (h *Hub) subscribeOnce(ctx context.Context, name string, c *channel, r *router) (uint64, error) {
	node, checked, gen := r.route(ctx, name)
	if node == nil {
		return gen, nil // the shard's master is not known yet: look again after a pause
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	bound := time.AfterFunc(subscribeTimeout, cancel)
	defer bound.Stop()
	var checks sync.WaitGroup
	defer checks.Wait()

	rctx := rueidis.WithOnSubscriptionHook(actx, func(s rueidis.PubSubSubscription) {
		if s.Channel != name {
			return
		}
		switch s.Kind {
		case "ssubscribe":
			if !checked {
				bound.Stop()
				h.mu.Lock()
				h.confirm(c)
				h.mu.Unlock()
				return
			}
			// The hook runs on the connection's reader: the check must not block it.
			checks.Add(1)
			go func() {
				defer checks.Done()
				h.check(actx, cancel, node, c, bound)
			}()
		case "sunsubscribe":
			// The slot moved or the shard failed over: Receive returns, and the channel
			// is subscribed again where it lives now.
			h.mu.Lock()
			c.lost = true
			c.unconfirm()
			h.mu.Unlock()
		}
	})
	rctx = rueidis.WithOnReceiveReturnHook(rctx, func(err error, cc rueidis.CommandClient) error {
		// Ended by us (released, closed, or the node was not the master): rueidis keeps
		// the node's connection subscribed unless told, and that connection carries other
		// traffic too.
		leaving := actx.Err() != nil
		// Ended by the server or the connection: no retry on this node, whose role may
		// have changed; the next attempt looks the shard up again.
		cancel()
		if leaving {
			uctx, ucancel := context.WithTimeout(context.Background(), routeTimeout)
			_ = cc.Do(uctx, cc.B().Sunsubscribe().Channel(name).Build()).Error()
			ucancel()
		}
		return err
	})
	err := node.Receive(rctx, node.B().Ssubscribe().Channel(name).Build(), h.onMessage)
	cancel()
	if errors.Is(err, context.Canceled) {
		err = nil // ended here (the node was no master, or the bound ran out), not by Redis
	}
	return gen, err
}

// check confirms a subscription unless node answers ROLE as anything but a master. Asked
// after the SSUBSCRIBE confirmation, the answer covers the subscription: a node that was a
// master then and is demoted later drops its shard's subscriptions, which ends the
// attempt. A node that is not a master ends the attempt at once. A node that does not
// answer (ROLE forbidden by an ACL, say) is trusted, as the cluster named it the master.
func (h *Hub) check(ctx context.Context, cancel context.CancelFunc, node rueidis.Client, c *channel, bound *time.Timer) {
	qctx, qcancel := context.WithTimeout(ctx, routeTimeout)
	role, err := node.Do(qctx, node.B().Role().Build()).ToArray()
	qcancel()
	if err == nil && len(role) > 0 {
		if kind, _ := role[0].ToString(); kind != "master" {
			cancel()
			return
		}
	}
	bound.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() == nil { // not ended meanwhile
		h.confirm(c)
	}
}

// router finds the master of a channel's shard from the cluster's own slot map, which it
// keeps until a subscription ends unexpectedly.
type router struct {
	rc      rueidis.Client
	cluster bool // otherwise rc has one master and routes by itself
	mu      sync.Mutex
	ranges  []slotRange // nil: not known, or forgotten
	gen     uint64      // counts the slot maps fetched
}

// slotRange is one entry of CLUSTER SLOTS: slots start to end are served by master ("" when
// its endpoint is unknown).
type slotRange struct {
	start, end uint16
	master     string
}

func newRouter(rc rueidis.Client) *router {
	return &router{rc: rc, cluster: rc.Mode() == rueidis.ClientModeCluster}
}

// route returns the client to subscribe channel on, whether it is a single node that must
// be checked to be a master, and the generation of the slot map it used. It returns a nil
// client when the shard's master is not known yet: the slot map leaves the slot out, which
// a node's answer does for a moment during a failover, or the cluster did not answer. The
// receiver then looks again after a pause, rather than subscribe through the client's own
// slot map, which may still name the demoted master: that node accepts the subscription as
// a replica, and nothing would check it. When the cluster does not say where the shard
// lives (not a cluster, CLUSTER SLOTS refused, a master of unknown endpoint, or one the
// client cannot reach), route returns the client itself, which routes by its own slot
// map: the best there is then.
func (r *router) route(ctx context.Context, channel string) (rueidis.Client, bool, uint64) {
	if !r.cluster {
		return r.rc, false, 0
	}
	addr, known, gen := r.master(ctx, keys.Slot(channel))
	switch {
	case !known:
		return nil, false, gen
	case addr == "":
		return r.rc, false, gen
	}
	if node, ok := r.rc.Nodes()[addr]; ok {
		return node, true, gen
	}
	// A master the client has no connection to: a promoted replica, which the client
	// learns of when it refreshes its slot map. A redirection starts that refresh, and a
	// read of the channel's name as a key gets one from the slot's old node.
	lctx, cancel := context.WithTimeout(ctx, learnTimeout)
	defer cancel()
	_ = r.rc.Do(lctx, r.rc.B().Exists().Key(channel).Build()).Error()
	t := time.NewTicker(learnPoll)
	defer t.Stop()
	for {
		if node, ok := r.rc.Nodes()[addr]; ok {
			return node, true, gen
		}
		select {
		case <-t.C:
		case <-lctx.Done():
			return r.rc, false, gen
		}
	}
}

// master returns the address of the master serving slot ("" when the cluster does not say),
// whether that is known, and the generation of the slot map, which it asks the cluster for
// when it has none. A refusal (an error reply, such as an ACL's) or a reply it cannot read
// leaves the routing to the client; no answer, or a map without the slot, is not known yet.
func (r *router) master(ctx context.Context, slot uint16) (string, bool, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ranges == nil {
		res := r.slots(ctx)
		if err := res.Error(); err != nil {
			_, refused := rueidis.IsRedisErr(err)
			return "", refused, r.gen
		}
		reply, err := res.ToArray()
		if err == nil {
			r.ranges, err = parseSlots(reply)
		}
		if err != nil {
			r.ranges = nil
			return "", true, r.gen // a reply it cannot read would read no better again
		}
		r.gen++
	}
	addr, known := find(r.ranges, slot)
	return addr, known, r.gen
}

// slots asks the cluster for its slot map (CLUSTER SLOTS), waiting routeTimeout at most.
// rueidis sends the query to any node, and it may wait for a dial of a node that hangs
// (see package bound), while every channel's route waits for r.mu.
func (r *router) slots(ctx context.Context) rueidis.RedisResult {
	qctx, cancel := context.WithTimeout(ctx, routeTimeout)
	defer cancel()
	res, ok := bound.Wait(qctx, func() rueidis.RedisResult {
		return r.rc.Do(qctx, r.rc.B().ClusterSlots().Build())
	})
	if !ok {
		return rueidis.NewErrorResult(qctx.Err())
	}
	return res
}

// find returns the master of the range that holds slot ("" when its endpoint is unknown),
// and whether any range does.
func find(ranges []slotRange, slot uint16) (string, bool) {
	for _, s := range ranges {
		if s.start <= slot && slot <= s.end {
			return s.master, true
		}
	}
	return "", false
}

// forget drops the slot map of generation gen, so that the next route asks the cluster
// again. A failover ends the subscriptions of all the shard's channels at once; a map
// fetched since the first of them noticed is kept, rather than fetched again by each.
func (r *router) forget(gen uint64) {
	r.mu.Lock()
	if r.gen == gen {
		r.ranges = nil
	}
	r.mu.Unlock()
}

// parseSlots reads a CLUSTER SLOTS reply: entries [start, end, [host, port, ...], replicas...].
// A master whose endpoint is unknown (nil, "" or "?") is kept with the address "", so that
// its slots route as the client does.
func parseSlots(reply []rueidis.RedisMessage) ([]slotRange, error) {
	ranges := make([]slotRange, 0, len(reply))
	for _, e := range reply {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			return nil, errors.New("pubsub: malformed CLUSTER SLOTS entry")
		}
		start, err1 := f[0].AsInt64()
		end, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err := errors.Join(err1, err2, err3); err != nil || len(node) < 2 {
			return nil, errors.New("pubsub: malformed CLUSTER SLOTS entry")
		}
		var host string
		if !node[0].IsNil() { // nil: the endpoint is unknown (cluster-preferred-endpoint-type)
			host, err1 = node[0].ToString()
		}
		port, err2 := node[1].AsInt64()
		if errors.Join(err1, err2) != nil {
			return nil, errors.New("pubsub: malformed CLUSTER SLOTS node")
		}
		master := ""
		if host != "" && host != "?" {
			master = net.JoinHostPort(host, strconv.FormatInt(port, 10))
		}
		ranges = append(ranges, slotRange{start: uint16(start), end: uint16(end), master: master})
	}
	return ranges, nil
}
