package redistest

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
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

// LateRequests is a client that can hold a request back and send it late (see Hold).
type LateRequests struct {
	rueidis.Client
	mu    sync.Mutex
	holds []*lateRequest
}

type lateRequest struct {
	held
	broken bool // its caller hears at once that the connection broke
	cmd    rueidis.Completed
	done   chan rueidis.RedisResult
}

// NewLateRequests returns a client on rc whose requests go through as they are until Hold
// arms a fault.
func NewLateRequests(rc rueidis.Client) *LateRequests { return &LateRequests{Client: rc} }

// Hold arms a one-shot fault: the next command whose arguments contain every marker is not
// sent; its caller hears nothing until its context ends, as when the reply is lost. send
// sends it then, behind whatever the client sent meanwhile, and returns once Redis has
// answered: a request that reached Redis late, as one written on a connection that rueidis
// closed at the call's deadline does when the client's next requests go out on a new one.
// arrived is closed when the command is called. send is idempotent, and does nothing if the
// command never came.
func (r *LateRequests) Hold(markers ...string) (arrived <-chan struct{}, send func()) {
	return r.hold(false, markers)
}

// HoldBroken is Hold, except that the caller hears at once that the connection broke
// (io.ErrUnexpectedEOF), as when a connection fails after the request was written: the
// client may ask Redis and send again within its call's time, before send delivers the
// first request.
func (r *LateRequests) HoldBroken(markers ...string) (arrived <-chan struct{}, send func()) {
	return r.hold(true, markers)
}

// Arrived fails t unless the request a Hold holds back has come (arrived is closed): a
// call that sent none proved nothing. call names it, and err is what it returned.
func Arrived(t testing.TB, arrived <-chan struct{}, call string, err error) {
	t.Helper()
	select {
	case <-arrived:
	default:
		t.Fatalf("%s sent no request to hold back (%v): the test proved nothing", call, err)
	}
}

func (r *LateRequests) hold(broken bool, markers []string) (arrived <-chan struct{}, send func()) {
	l := &lateRequest{held: held{arrived: make(chan struct{}), release: make(chan struct{})}, broken: broken, done: make(chan rueidis.RedisResult, 1)}
	for _, m := range markers {
		l.markers = append(l.markers, []byte(m))
	}
	r.mu.Lock()
	r.holds = append(r.holds, l)
	r.mu.Unlock()
	return l.arrived, func() {
		l.once.Do(func() {
			r.mu.Lock()
			fired := l.fired
			r.mu.Unlock()
			if fired {
				l.done <- r.Client.Do(context.Background(), l.cmd)
			}
		})
	}
}

func (r *LateRequests) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r.mu.Lock()
	var l *lateRequest
	if i := slices.IndexFunc(r.holds, func(l *lateRequest) bool {
		return !l.fired && containsAll([]byte(strings.Join(cmd.Commands(), "\x00")), l.markers)
	}); i >= 0 {
		l = r.holds[i]
		l.fired, l.cmd = true, cmd
	}
	r.mu.Unlock()
	if l == nil {
		return r.Client.Do(ctx, cmd)
	}
	close(l.arrived)
	if l.broken {
		return rueidis.NewErrorResult(io.ErrUnexpectedEOF)
	}
	select {
	case <-ctx.Done():
		return rueidis.NewErrorResult(ctx.Err())
	case res := <-l.done:
		return res
	}
}
