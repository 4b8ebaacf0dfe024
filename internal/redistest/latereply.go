package redistest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// LateReply returns a client that holds back for d the reply of the first command naming
// key that Redis ran without error: the command takes effect at once, its caller hears of
// it late (a slow network on the way back). Every other command goes through as it is.
func LateReply(rc rueidis.Client, key string, d time.Duration) rueidis.Client {
	return &lateReply{Client: rc, key: key, d: d}
}

type lateReply struct {
	rueidis.Client
	key  string
	d    time.Duration
	once sync.Once
}

func (r *lateReply) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	// Read the command before sending it: rueidis recycles it once sent.
	named := slices.Contains(cmd.Commands(), r.key)
	res := r.Client.Do(ctx, cmd)
	if named && res.Error() == nil {
		r.once.Do(func() { time.Sleep(r.d) })
	}
	return res
}
