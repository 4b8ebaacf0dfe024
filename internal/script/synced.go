package script

import (
	"context"

	"github.com/redis/rueidis"
)

// maxRedirects bounds the MOVED and ASK redirections that Synced follows for one call.
const maxRedirects = 5

// Synced runs call followed by WAIT numreplicas timeout (in milliseconds) on one
// connection of the node that runs call, and returns the call's result and WAIT's. WAIT
// counts the replicas that have the writes of its own connection, so it says nothing of
// the call unless it follows the call where the call ran. A cluster client that follows
// a redirection (MOVED, or ASK while the slot moves) sends only the redirected command to
// the new node, and takes the WAIT answer of the node that refused the call; Synced
// follows redirections itself and sends WAIT along (after ASKING, for an ASK). A call met
// with NOSCRIPT is sent again with EVAL, followed by WAIT again, on the same connection. A
// redirection to a node the client does not know, or past maxRedirects, is the call's
// result, with WAIT's answer of the node that gave it.
func Synced(ctx context.Context, rc rueidis.Client, call Call, numreplicas, timeout int64) (result, replicas rueidis.RedisResult) {
	run := func(cc rueidis.CoreClient, asking bool) error {
		send := func(sha bool) []rueidis.RedisResult {
			b := cc.B()
			cmds := make(rueidis.Commands, 0, 3)
			if asking {
				cmds = append(cmds, b.Asking().Build())
			}
			cmds = append(cmds, call.build(b, sha), b.Wait().Numreplicas(numreplicas).Timeout(timeout).Build())
			res := cc.DoMulti(ctx, cmds...)
			return res[len(res)-2:]
		}
		res := send(true)
		if noScript(res[0]) {
			res = send(false)
		}
		result, replicas = res[0], res[1]
		return nil
	}
	// A dedicated connection: the pair is not split, nor its call redirected alone.
	if err := rc.Dedicated(func(d rueidis.DedicatedClient) error { return run(d, false) }); err != nil {
		return rueidis.NewErrorResult(err), rueidis.NewErrorResult(err)
	}
	for range maxRedirects {
		re, ok := rueidis.IsRedisErr(result.Error())
		if !ok {
			return result, replicas
		}
		addr, ask := re.IsAsk()
		if !ask {
			var moved bool
			if addr, moved = re.IsMoved(); !moved {
				return result, replicas
			}
		}
		node, ok := rc.Nodes()[addr]
		if !ok {
			return result, replicas
		}
		if err := node.Dedicated(func(d rueidis.DedicatedClient) error { return run(d, ask) }); err != nil {
			return rueidis.NewErrorResult(err), rueidis.NewErrorResult(err)
		}
	}
	return result, replicas
}
