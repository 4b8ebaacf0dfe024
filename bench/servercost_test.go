package main

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// The server's CPU time per lock+unlock cycle, for the commands and scripts that the
// libraries send, each on a fresh redis-server with 64 goroutines on their own keys, as in
// S1: it shows where the S1 gap to the SET NX libraries comes from.
//
//	cd bench && go test -run '^$' -bench ServerCost -benchtime 2s
func BenchmarkServerCost(b *testing.B) {
	acquire := rueidis.NewLuaScript(`if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, count, 0}
end
return {0, redis.call('pttl', KEYS[1])}`)
	// The unlock script without and with its parts: the latch (a key per request, with an
	// expiry) and the PUBLISH.
	unlock := func(latch, publish bool) *rueidis.Lua {
		s := ""
		if latch {
			s += "local done = redis.call('get', KEYS[3]) if done then return tonumber(done) end\n"
		}
		s += "if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end\n"
		s += "if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then return 0 end\n"
		s += "redis.call('del', KEYS[1])\n"
		if publish {
			s += "redis.call('publish', KEYS[2], ARGV[1])\n"
		}
		if latch {
			s += "redis.call('set', KEYS[3], 1, 'px', ARGV[3])\n"
		}
		return rueidis.NewLuaScript(s + "return 1")
	}
	noop := rueidis.NewLuaScript("return 1")
	scripts := func(u *rueidis.Lua) func(context.Context, rueidis.Client, string, string, int64) error {
		return func(ctx context.Context, rc rueidis.Client, key, owner string, n int64) error {
			if err := acquire.Exec(ctx, rc, []string{key}, []string{"30000", owner}).Error(); err != nil {
				return err
			}
			latch := "latch:{" + key + "}:" + strconv.FormatInt(n, 10)
			return u.Exec(ctx, rc, []string{key, "channel:{" + key + "}", latch}, []string{"0", owner, "6000"}).Error()
		}
	}
	for _, v := range []struct {
		name  string
		cycle func(ctx context.Context, rc rueidis.Client, key, owner string, n int64) error
	}{
		{"set-nx+del", func(ctx context.Context, rc rueidis.Client, key, owner string, _ int64) error {
			if err := rc.Do(ctx, rc.B().Set().Key(key).Value(owner).Nx().Px(30*time.Second).Build()).Error(); err != nil {
				return err
			}
			return rc.Do(ctx, rc.B().Del().Key(key).Build()).Error()
		}},
		{"two-noop-scripts", func(ctx context.Context, rc rueidis.Client, key, _ string, _ int64) error {
			if err := noop.Exec(ctx, rc, []string{key}, nil).Error(); err != nil {
				return err
			}
			return noop.Exec(ctx, rc, []string{key}, nil).Error()
		}},
		{"relock-scripts", scripts(unlock(true, true))},
		{"without-latch", scripts(unlock(false, true))},
		{"without-latch-and-publish", scripts(unlock(false, false))},
	} {
		b.Run(v.name, func(b *testing.B) {
			srv, addr, err := startServer()
			if err != nil {
				b.Fatal(err)
			}
			defer srv.stop()
			adm, err := newAdmin(addr)
			if err != nil {
				b.Fatal(err)
			}
			defer adm.close()
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
			if err != nil {
				b.Fatal(err)
			}
			defer rc.Close()
			ctx := context.Background()
			cpu0, err := adm.cpu(ctx)
			if err != nil {
				b.Fatal(err)
			}
			var g atomic.Int64
			// RunParallel runs parallelism × GOMAXPROCS goroutines: 64, as S1.
			b.SetParallelism(max(1, s1Workers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := strconv.FormatInt(g.Add(1), 10)
				var n int64
				for pb.Next() {
					n++
					if err := v.cycle(ctx, rc, "k"+id, "o"+id, n); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			cpu1, err := adm.cpu(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cpu1-cpu0)/float64(time.Microsecond)/float64(b.N), "server-µs/cycle")
		})
	}
}
