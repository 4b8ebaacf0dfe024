package script

import (
	"context"

	"github.com/redis/rueidis"
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

// Batch sends calls, followed by the commands then builds (nil: none), in one pipelined
// round trip with EVALSHA. The calls that met NOSCRIPT (a restarted or flushed server) are
// sent again with EVAL, followed by then's commands again, since what they wait for or
// read (WAIT after an acquisition) belongs to the calls that did not run. It returns one
// result per call, then one per command of then, and how many calls it sent again.
func Batch(ctx context.Context, rc rueidis.Client, calls []Call, then func() rueidis.Commands) (results []rueidis.RedisResult, resent int) {
	cmds := make(rueidis.Commands, 0, len(calls)+1)
	for _, c := range calls {
		cmds = append(cmds, c.build(rc.B(), true))
	}
	if then != nil {
		cmds = append(cmds, then()...)
	}
	results = rc.DoMulti(ctx, cmds...)

	var again []int
	for i, r := range results[:len(calls)] {
		if err, ok := rueidis.IsRedisErr(r.Error()); ok && err.IsNoScript() {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return results, 0
	}
	retry := make(rueidis.Commands, 0, len(again)+1)
	for _, i := range again {
		retry = append(retry, calls[i].build(rc.B(), false))
	}
	if then != nil {
		retry = append(retry, then()...)
	}
	res := rc.DoMulti(ctx, retry...)
	for j, i := range again {
		results[i] = res[j]
	}
	copy(results[len(calls):], res[len(again):])
	return results, len(again)
}
