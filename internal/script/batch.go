package script

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/keys"
)

// Call is one script call of a batch.
type Call struct {
	Script     *Script
	Keys, Args []string
}

func (c Call) build(b rueidis.Builder, sha bool) rueidis.Completed {
	if sha {
		return b.Evalsha().Sha1(c.Script.SHA1).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
	}
	return b.Eval().Script(c.Script.Source).Numkeys(int64(len(c.Keys))).Key(c.Keys...).Arg(c.Args...).Build()
}

// Batch sends calls in one pipelined round trip with EVALSHA. The calls that met NOSCRIPT
// (a restarted or flushed server) are sent again with EVAL. It returns one result per
// call, in the order of the calls, and how many calls it sent again.
//
// On a cluster, calls of several slots go out a round trip per slot, all at once: a node
// that does not answer holds up its own calls only. In one pipelined round trip the calls
// of every node would wait for the slowest one before the calls that met NOSCRIPT could be
// sent again, by when ctx may be spent for all of them.
//
// Batch returns by the time ctx ends, whatever holds a call up. A call to a node whose
// connection another caller is dialling waits for that dial, which ctx does not bound (the
// client's own cluster refresh dials with no deadline but the dial timeout): such a call
// answers ctx's error then, and sends nothing once it goes on, since the client sends
// nothing for a context that has ended.
func Batch(ctx context.Context, rc rueidis.Client, calls []Call) (results []rueidis.RedisResult, resent int) {
	if len(calls) > 1 && rc.Mode() == rueidis.ClientModeCluster {
		if groups := bySlot(calls); len(groups) > 1 {
			return batchApart(ctx, rc, calls, groups)
		}
	}
	if ctx.Done() == nil {
		return batch(ctx, rc, calls)
	}
	every := make([]int, len(calls))
	for i := range every {
		every[i] = i
	}
	return batchApart(ctx, rc, calls, [][]int{every})
}

// bySlot returns the indexes of calls grouped by the slot of their first key, in the
// order of each slot's first call. (A call's keys share one slot: see keys.)
func bySlot(calls []Call) [][]int {
	var groups [][]int
	at := make(map[uint16]int)
	for i, c := range calls {
		var slot uint16
		if len(c.Keys) > 0 {
			slot = keys.Slot(c.Keys[0])
		}
		g, ok := at[slot]
		if !ok {
			g = len(groups)
			at[slot] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// batchApart sends each group of calls (indexes into calls: see bySlot) in a batch of its
// own, the groups at once, each in a goroutine of its own (see package bound). It returns once every group has answered, or once ctx has
// ended, with ctx's error for the calls of the groups that have not answered by then (see
// package bound for why a group may not).
func batchApart(ctx context.Context, rc rueidis.Client, calls []Call, groups [][]int) ([]rueidis.RedisResult, int) {
	type reply struct {
		group   int
		results []rueidis.RedisResult
		resent  int
	}
	// Buffered: a group that answers after ctx ended finds no one waiting.
	replies := make(chan reply, len(groups))
	for g, idx := range groups {
		sub := make([]Call, len(idx))
		for j, i := range idx {
			sub[j] = calls[i]
		}
		go func() {
			res, n := batch(ctx, rc, sub)
			replies <- reply{g, res, n}
		}()
	}
	results := make([]rueidis.RedisResult, len(calls))
	answered := make([]bool, len(groups))
	resent := 0
	take := func(r reply) {
		answered[r.group] = true
		resent += r.resent
		for j, i := range groups[r.group] {
			results[i] = r.results[j]
		}
	}
	for range groups {
		select {
		case r := <-replies:
			take(r)
		case <-ctx.Done():
			for more := true; more; { // the answers that came meanwhile are taken
				select {
				case r := <-replies:
					take(r)
				default:
					more = false
				}
			}
			failed := rueidis.NewErrorResult(ctx.Err())
			for g, idx := range groups {
				if !answered[g] {
					for _, i := range idx {
						results[i] = failed
					}
				}
			}
			return results, resent
		}
	}
	return results, resent
}

// batch is Batch in one pipelined round trip (and one more for the calls that met
// NOSCRIPT).
func batch(ctx context.Context, rc rueidis.Client, calls []Call) (results []rueidis.RedisResult, resent int) {
	cmds := make(rueidis.Commands, 0, len(calls))
	for _, c := range calls {
		cmds = append(cmds, c.build(rc.B(), true))
	}
	results = rc.DoMulti(ctx, cmds...)

	var again []int
	for i, r := range results {
		if noScript(r) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return results, 0
	}
	retry := make(rueidis.Commands, 0, len(again))
	for _, i := range again {
		retry = append(retry, calls[i].build(rc.B(), false))
	}
	res := rc.DoMulti(ctx, retry...)
	for j, i := range again {
		results[i] = res[j]
	}
	return results, len(again)
}

// noScript reports whether r is the server's NOSCRIPT: it does not have the script that
// an EVALSHA named (a restarted or flushed server), which EVAL then sends whole.
func noScript(r rueidis.RedisResult) bool {
	err, ok := rueidis.IsRedisErr(r.Error())
	return ok && err.IsNoScript()
}
