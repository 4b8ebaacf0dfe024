package relockotel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
	"github.com/relock-go/relock/observe"
	relockotel "github.com/relock-go/relock/otel"
)

// The tests run on the repository's test harness: miniredis and redis-servers of their own
// on free loopback ports (redistest), with relock clients on them (relocktest) that log
// nowhere. redistest.Main also checks that no goroutine is left after them.
func TestMain(m *testing.M) {
	os.Exit(redistest.Main(m))
}

// telemetry is an Observer on in-memory SDK providers.
type telemetry struct {
	obs    *relockotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		tp.Shutdown(context.Background())
	})
	obs, err := relockotel.New(relockotel.WithMeterProvider(mp), relockotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	return &telemetry{obs: obs, reader: reader, spans: spans}
}

// collect returns the metrics recorded so far, by name.
func (tm *telemetry) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	ms := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != relockotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, relockotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			ms[m.Name] = m
		}
	}
	return ms
}

// histogram returns the data point of the histogram name with exactly the attributes kvs;
// it fails the test when there is none, or the histogram's unit is not seconds.
func histogram(t *testing.T, ms map[string]metricdata.Metrics, name string, kvs ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	if m.Unit != "s" {
		t.Errorf("%s: unit %q, want s", name, m.Unit)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T, not a float64 histogram", name, m.Data)
	}
	want := attribute.NewSet(kvs...)
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp
		}
	}
	t.Fatalf("%s: no data point with attributes %v; it has %v", name, want.ToSlice(), points(h.DataPoints))
	return metricdata.HistogramDataPoint[float64]{}
}

// recorded reports whether the histogram name has a data point with exactly the
// attributes kvs.
func recorded(ms map[string]metricdata.Metrics, name string, kvs ...attribute.KeyValue) bool {
	h, _ := ms[name].Data.(metricdata.Histogram[float64])
	want := attribute.NewSet(kvs...)
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&want) {
			return true
		}
	}
	return false
}

// counter returns the value of the counter name with exactly the attributes kvs: 0 when
// there is no such data point.
func counter(t *testing.T, ms map[string]metricdata.Metrics, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !s.IsMonotonic {
		t.Fatalf("%s is a %T, not a monotonic int64 sum", name, m.Data)
	}
	want := attribute.NewSet(kvs...)
	for _, dp := range s.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value
		}
	}
	return 0
}

// total returns the sum of the counter name over all its data points: 0 when it has none.
func total(t *testing.T, ms map[string]metricdata.Metrics, name string) int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok || !s.IsMonotonic {
		t.Fatalf("%s is a %T, not a monotonic int64 sum", name, m.Data)
	}
	var n int64
	for _, dp := range s.DataPoints {
		n += dp.Value
	}
	return n
}

func points[N int64 | float64](dps []metricdata.HistogramDataPoint[N]) []string {
	var s []string
	for _, dp := range dps {
		s = append(s, fmt.Sprint(dp.Attributes.ToSlice()))
	}
	return s
}

// noUnboundedAttributes checks that no data point of any metric names a lock or an owner.
func noUnboundedAttributes(t *testing.T, ms map[string]metricdata.Metrics) {
	t.Helper()
	check := func(name string, set attribute.Set) {
		for _, k := range []attribute.Key{relockotel.KeyName, relockotel.KeyOwner} {
			if set.HasValue(k) {
				t.Errorf("%s has the attribute %s", name, k)
			}
		}
	}
	for name, m := range ms {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				check(name, dp.Attributes)
			}
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				check(name, dp.Attributes)
			}
		}
	}
}

func kind(k observe.Kind) attribute.KeyValue { return relockotel.KeyKind.String(string(k)) }
func woken(w string) attribute.KeyValue      { return relockotel.KeyWoken.String(w) }
func ended(e string) attribute.KeyValue      { return relockotel.KeyHoldEnd.String(e) }

// within fails the test unless lo <= got <= hi (got in seconds).
func within(t *testing.T, what string, got float64, lo, hi time.Duration) {
	t.Helper()
	if got < lo.Seconds() || got > hi.Seconds() {
		t.Errorf("%s = %.6fs, want within [%v, %v]", what, got, lo, hi)
	}
}

// locker is one side of a lock of some kind, as the tests use it.
type locker struct {
	lock   func(context.Context) (context.Context, error)
	unlock func(context.Context) error
}

// kinds are the cases of a holder and a waiter that must wait for it: the waiter's kind
// is the one reported.
var kinds = []struct {
	name, holderKind observe.Kind
	holder, waiter   func(c *relock.Client, name string) locker
}{
	{observe.Lock, observe.Lock, plain, plain},
	{observe.FairLock, observe.FairLock, fair, fair},
	{observe.Write, observe.Write, write, write},
	{observe.Read, observe.Write, write, read},
}

func plain(c *relock.Client, name string) locker {
	m := c.Lock(name)
	return locker{func(ctx context.Context) (context.Context, error) { return m.Lock(ctx) }, m.Unlock}
}

func fair(c *relock.Client, name string) locker {
	m := c.FairLock(name)
	return locker{func(ctx context.Context) (context.Context, error) { return m.Lock(ctx) }, m.Unlock}
}

func write(c *relock.Client, name string) locker {
	m := c.RWLock(name)
	return locker{func(ctx context.Context) (context.Context, error) { return m.Lock(ctx) }, m.Unlock}
}

func read(c *relock.Client, name string) locker {
	m := c.RWLock(name)
	return locker{func(ctx context.Context) (context.Context, error) { return m.RLock(ctx) }, m.RUnlock}
}

// holdFor is how long the holder keeps the lock once the waiter is seen waiting.
const holdFor = 200 * time.Millisecond

// A waiter parked behind a holder that unlocks after a known delay: the waiter's wait, its
// wake-up and its span, and the holder's wait and hold, with the values they must have.
func TestWaitAndHold(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range kinds {
			t.Run(string(k.name), func(t *testing.T) {
				holderTel, waiterTel := newTelemetry(t), newTelemetry(t)
				holderC := relocktest.New(t, b, relock.WithLogger(nil), relock.WithObserver(holderTel.obs))
				waiterC := relocktest.New(t, b, relock.WithLogger(nil), relock.WithObserver(waiterTel.obs))
				name := "otel:" + string(k.name)
				holder, waiter := k.holder(holderC, name), k.waiter(waiterC, name)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()

				hStart := time.Now()
				held, err := holder.lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				hLocked := time.Now()

				type result struct {
					start, end time.Time
					held       context.Context
					err        error
				}
				done := make(chan result, 1)
				go func() {
					start := time.Now()
					held, err := waiter.lock(ctx)
					done <- result{start, time.Now(), held, err}
				}()
				// The waiter's wait began before it is seen parked, and ends after the
				// unlock is sent: it lasts at least from one to the other.
				redistest.Eventually(t, 10*time.Second, "the waiter parks", func() bool { return relocktest.Waiting(waiterC) > 0 })
				parked := time.Now()
				time.Sleep(holdFor)
				hUnlocking := time.Now()
				if err := holder.unlock(held); err != nil {
					t.Fatal(err)
				}
				hUnlocked := time.Now()
				w := redistest.Recv(t, done, 20*time.Second, "the waiter gets the lock after the unlock")
				if w.err != nil {
					t.Fatal(w.err)
				}
				defer waiter.unlock(w.held)
				minWait, maxWait := hUnlocking.Sub(parked), w.end.Sub(w.start)

				// The waiter: one wait, woken by the release's message, within bounds.
				ms := waiterTel.collect(t)
				noUnboundedAttributes(t, ms)
				dp := histogram(t, ms, "relock.lock.wait.duration", kind(k.name), woken("message"))
				if dp.Count != 1 {
					t.Errorf("waiter: wait count %d, want 1", dp.Count)
				}
				within(t, "waiter: wait", dp.Sum, minWait, maxWait)
				if n := counter(t, ms, "relock.wakeups", kind(k.name), woken("message")); n != 1 {
					t.Errorf("waiter: wakeups by message %d, want 1", n)
				}
				if n := counter(t, ms, "relock.wakeups", kind(k.name), woken("lease")); n != 0 {
					t.Errorf("waiter: wakeups by lease %d, want 0", n)
				}
				if _, ok := ms["relock.lock.hold.duration"]; ok {
					t.Error("waiter: a hold duration before its hold ended")
				}

				// Its span: the wait, after the fact.
				spans := waiterTel.spans.Ended()
				if len(spans) != 1 {
					t.Fatalf("waiter: %d spans, want 1", len(spans))
				}
				s := spans[0]
				if s.Name() != relockotel.SpanName || s.SpanKind() != trace.SpanKindInternal {
					t.Errorf("span %q of kind %v", s.Name(), s.SpanKind())
				}
				if s.Parent().IsValid() {
					t.Errorf("span has a parent: %v", s.Parent())
				}
				if s.StartTime().Before(w.start) || s.EndTime().After(w.end) {
					t.Errorf("span [%v, %v] not within the Lock call [%v, %v]", s.StartTime(), s.EndTime(), w.start, w.end)
				}
				d := s.EndTime().Sub(s.StartTime())
				within(t, "span duration", d.Seconds(), minWait, maxWait)
				if math.Abs(d.Seconds()-dp.Sum) > 1e-6 {
					t.Errorf("span duration %v, recorded wait %.6fs", d, dp.Sum)
				}
				attrs := attribute.NewSet(s.Attributes()...)
				for key, want := range map[attribute.Key]any{
					relockotel.KeyName:      name,
					relockotel.KeyKind:      string(k.name),
					relockotel.KeyWoken:     "message",
					relockotel.KeyHoldCount: int64(1),
				} {
					if v, ok := attrs.Value(key); !ok || v.AsInterface() != want {
						t.Errorf("span attribute %s = %v, want %v", key, v.AsInterface(), want)
					}
				}
				if v, ok := attrs.Value(relockotel.KeyOwner); !ok || v.AsString() == "" {
					t.Errorf("span has no owner")
				}

				// The holder: it did not wait, and held from its Lock to its Unlock.
				ms = holderTel.collect(t)
				noUnboundedAttributes(t, ms)
				dp = histogram(t, ms, "relock.lock.wait.duration", kind(k.holderKind), woken("not_waited"))
				if dp.Count != 1 {
					t.Errorf("holder: wait count %d, want 1", dp.Count)
				}
				within(t, "holder: wait", dp.Sum, 0, hLocked.Sub(hStart))
				dp = histogram(t, ms, "relock.lock.hold.duration", kind(k.holderKind), ended("released"))
				if dp.Count != 1 {
					t.Errorf("holder: hold count %d, want 1", dp.Count)
				}
				within(t, "holder: hold", dp.Sum, hUnlocking.Sub(hLocked), hUnlocked.Sub(hStart))
				if n := len(holderTel.spans.Ended()); n != 0 {
					t.Errorf("holder: %d spans for an acquisition that did not wait", n)
				}
			})
		}
	})
}

// A hold whose key is deleted by hand is found lost at the next renewal: the lost counter
// and the hold's duration, under its kind.
func TestLeaseLost(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, k := range []struct {
			name observe.Kind
			lock func(c *relock.Client, name string) locker
		}{{observe.Lock, plain}, {observe.FairLock, fair}, {observe.Write, write}, {observe.Read, read}} {
			t.Run(string(k.name), func(t *testing.T) {
				t.Parallel()
				tel := newTelemetry(t)
				// Renewals every second: the loss is found within about one.
				c := relocktest.New(t, b, relock.WithLogger(nil), relock.WithObserver(tel.obs), relock.WithWatchdogTimeout(3*time.Second))
				rc := b.Client(t)
				name := "otel:lost:" + string(k.name)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				start := time.Now()
				held, err := k.lock(c, name).lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				locked := time.Now()
				redistest.MustDo(t, rc, "DEL", name)
				deleted := time.Now()
				redistest.Recv(t, held.Done(), 20*time.Second, "the hold's context ends after its key's deletion")
				if cause := context.Cause(held); !errors.Is(cause, relock.ErrLeaseLost) {
					t.Fatalf("the hold's context ended with %v, want ErrLeaseLost", cause)
				}
				// The observer hears of the loss just after the context ends, on the
				// watchdog's goroutine.
				var ms map[string]metricdata.Metrics
				redistest.Eventually(t, 10*time.Second, "the loss is counted", func() bool {
					ms = tel.collect(t)
					return counter(t, ms, "relock.lease.lost", kind(k.name)) > 0 &&
						recorded(ms, "relock.lock.hold.duration", kind(k.name), ended("lost"))
				})
				counted := time.Now()
				noUnboundedAttributes(t, ms)
				if n := counter(t, ms, "relock.lease.lost", kind(k.name)); n != 1 {
					t.Errorf("lost %d, want 1", n)
				}
				dp := histogram(t, ms, "relock.lock.hold.duration", kind(k.name), ended("lost"))
				if dp.Count != 1 {
					t.Errorf("lost holds' durations: count %d, want 1", dp.Count)
				}
				within(t, "lost hold", dp.Sum, deleted.Sub(locked), counted.Sub(start))
				t.Logf("hold lost after %.3fs (deleted at %v, loss counted by %v)", dp.Sum, deleted.Sub(start), counted.Sub(start))
				if n := counter(t, ms, "relock.hold.abandoned", kind(k.name)); n != 0 {
					t.Errorf("abandoned %d, want 0", n)
				}
			})
		}
	})
}

// The subscriber connection killed under a parked waiter comes back: one reconnect, with
// an outage no longer than the time from the kill to its being seen. On a real
// redis-server only: miniredis has no CLIENT KILL.
func TestReconnected(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		rc := b.Client(t)
		tel := newTelemetry(t)
		holderC := relocktest.New(t, b, relock.WithLogger(nil))
		waiterC := relocktest.New(t, b, relock.WithLogger(nil), relock.WithObserver(tel.obs))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		held, err := holderC.Lock("otel:reconnect").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			held, err := waiterC.Lock("otel:reconnect").Lock(ctx)
			if err == nil {
				err = waiterC.Lock("otel:reconnect").Unlock(held)
			}
			done <- err
		}()
		redistest.Eventually(t, 10*time.Second, "the waiter parks", func() bool { return relocktest.Waiting(waiterC) > 0 })
		killed := time.Now()
		redistest.MustDo(t, rc, "CLIENT", "KILL", "TYPE", "pubsub")
		var ms map[string]metricdata.Metrics
		redistest.Eventually(t, 15*time.Second, "the subscriber connection is back", func() bool {
			ms = tel.collect(t)
			return counter(t, ms, "relock.pubsub.reconnects") > 0
		})
		seen := time.Now()
		if n := counter(t, ms, "relock.pubsub.reconnects"); n != 1 {
			t.Errorf("reconnects %d, want 1", n)
		}
		dp := histogram(t, ms, "relock.pubsub.outage.duration")
		if dp.Count != 1 {
			t.Errorf("outages: count %d, want 1", dp.Count)
		}
		within(t, "outage", dp.Sum, 0, seen.Sub(killed))
		t.Logf("outage %.4fs, seen after %v", dp.Sum, seen.Sub(killed))
		if err := holderC.Lock("otel:reconnect").Unlock(held); err != nil {
			t.Fatal(err)
		}
		if err := redistest.Recv(t, done, 20*time.Second, "the waiter gets the lock after the unlock"); err != nil {
			t.Fatal(err)
		}
	})
}

// The events that the tests above cannot bring about on demand, called directly: each
// lands in its instrument, converted to seconds, under its attributes.
func TestEvents(t *testing.T) {
	tel := newTelemetry(t)
	o := tel.obs
	o.RenewalFailed(errors.New("down"))
	o.RenewalFailed(errors.New("down again"))
	o.RenewalRecovered(1500 * time.Millisecond)
	o.Reconnected(250 * time.Millisecond)
	o.Abandoned(observe.Hold{Lock: "a", Kind: observe.Read, Owner: "x:1", Held: 2 * time.Second})
	o.Abandoned(observe.Hold{Lock: "b", Kind: observe.Read, Owner: "x:2", Held: 3 * time.Second})
	o.Released(observe.Hold{Lock: "c", Kind: observe.FairLock, Owner: "x:3", Held: 40 * time.Millisecond})
	o.LeaseLost(observe.Hold{Lock: "d", Kind: observe.Write, Owner: "x:4", Held: 7 * time.Second})
	o.Acquired(observe.Acquisition{Lock: "e", Kind: observe.Lock, Owner: "x:5", Count: 2, Wait: 3 * time.Second, Woken: observe.ByLease})
	o.Acquired(observe.Acquisition{Lock: "f", Kind: observe.Lock, Owner: "x:6", Count: 1, Wait: time.Millisecond, Woken: observe.NotWaited})
	o.Acquired(observe.Acquisition{Lock: "h", Kind: observe.SpinLock, Owner: "x:8", Count: 1, Wait: 250 * time.Millisecond, Woken: observe.ByBackOff})
	o.Acquired(observe.Acquisition{Lock: "i", Kind: observe.Lock, Owner: "x:9", Count: 1, Wait: 125 * time.Millisecond, Woken: observe.ByHandoff})
	// A kind and an outcome this package does not know yet are recorded as they are.
	o.Acquired(observe.Acquisition{Lock: "g", Kind: "semaphore", Owner: "x:7", Count: 1, Wait: 500 * time.Millisecond, Woken: observe.Woken(9)})

	ms := tel.collect(t)
	noUnboundedAttributes(t, ms)
	for name, want := range map[string]int64{
		"relock.lease.renewal.failures":   2,
		"relock.lease.renewal.recoveries": 1,
		"relock.pubsub.reconnects":        1,
	} {
		if n := counter(t, ms, name); n != want {
			t.Errorf("%s = %d, want %d", name, n, want)
		}
	}
	// Each event counts in its own counter only: a release is no loss, nor an abandonment.
	for name, want := range map[string]int64{
		"relock.lease.lost":     1,
		"relock.hold.abandoned": 2,
		"relock.wakeups":        4,
	} {
		if n := total(t, ms, name); n != want {
			t.Errorf("%s = %d over all attributes, want %d", name, n, want)
		}
	}
	sum := func(name string, want float64, count uint64, kvs ...attribute.KeyValue) {
		t.Helper()
		dp := histogram(t, ms, name, kvs...)
		if dp.Count != count || math.Abs(dp.Sum-want) > 1e-9 {
			t.Errorf("%s%v: count %d sum %v, want %d and %v", name, kvs, dp.Count, dp.Sum, count, want)
		}
	}
	sum("relock.lease.renewal.outage.duration", 1.5, 1)
	sum("relock.pubsub.outage.duration", 0.25, 1)
	sum("relock.lock.hold.duration", 5, 2, kind(observe.Read), ended("abandoned"))
	sum("relock.lock.hold.duration", 0.04, 1, kind(observe.FairLock), ended("released"))
	sum("relock.lock.hold.duration", 7, 1, kind(observe.Write), ended("lost"))
	sum("relock.lock.wait.duration", 3, 1, kind(observe.Lock), woken("lease"))
	sum("relock.lock.wait.duration", 0.001, 1, kind(observe.Lock), woken("not_waited"))
	sum("relock.lock.wait.duration", 0.5, 1, kind("semaphore"), woken("unknown"))
	// The documented values of relock.lock.woken for a spin lock's back-off and a handoff.
	sum("relock.lock.wait.duration", 0.25, 1, kind(observe.SpinLock), woken("back_off"))
	sum("relock.lock.wait.duration", 0.125, 1, kind(observe.Lock), woken("handoff"))
	for _, c := range []struct {
		name string
		kvs  []attribute.KeyValue
		want int64
	}{
		{"relock.hold.abandoned", []attribute.KeyValue{kind(observe.Read)}, 2},
		{"relock.lease.lost", []attribute.KeyValue{kind(observe.Write)}, 1},
		{"relock.lease.lost", []attribute.KeyValue{kind(observe.Read)}, 0},
		{"relock.wakeups", []attribute.KeyValue{kind(observe.Lock), woken("lease")}, 1},
		{"relock.wakeups", []attribute.KeyValue{kind(observe.Lock), woken("not_waited")}, 0},
		{"relock.wakeups", []attribute.KeyValue{kind("semaphore"), woken("unknown")}, 1},
		{"relock.wakeups", []attribute.KeyValue{kind(observe.SpinLock), woken("back_off")}, 1},
		{"relock.wakeups", []attribute.KeyValue{kind(observe.Lock), woken("handoff")}, 1},
	} {
		if n := counter(t, ms, c.name, c.kvs...); n != c.want {
			t.Errorf("%s%v = %d, want %d", c.name, c.kvs, n, c.want)
		}
	}

	// Spans for the four that waited, not for the one that did not; each as long as its
	// wait.
	spans := tel.spans.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	for i, want := range []struct {
		lock, kind, owner string
		wait              time.Duration
		woken             string
		count             int64
	}{
		{"e", "lock", "x:5", 3 * time.Second, "lease", 2},
		{"h", "spinlock", "x:8", 250 * time.Millisecond, "back_off", 1},
		{"i", "lock", "x:9", 125 * time.Millisecond, "handoff", 1},
		{"g", "semaphore", "x:7", 500 * time.Millisecond, "unknown", 1},
	} {
		s := spans[i]
		if d := s.EndTime().Sub(s.StartTime()); d != want.wait {
			t.Errorf("span %d lasts %v, want %v", i, d, want.wait)
		}
		attrs := attribute.NewSet(s.Attributes()...)
		for key, v := range map[attribute.Key]any{
			relockotel.KeyName: want.lock, relockotel.KeyKind: want.kind, relockotel.KeyOwner: want.owner,
			relockotel.KeyWoken: want.woken, relockotel.KeyHoldCount: want.count,
		} {
			if got, _ := attrs.Value(key); got.AsInterface() != v {
				t.Errorf("span %d: %s = %v, want %v", i, key, got.AsInterface(), v)
			}
		}
	}
}

// Every instrument of the documented table (otel's package doc, docs/operations.md) has
// its kind and unit, and every histogram its buckets, from a loopback round trip (0.5 ms)
// to a lock held for half an hour: the SDK's default buckets (0 to 10000, made for
// milliseconds) would put nearly every wait in seconds in one bucket.
func TestInstruments(t *testing.T) {
	tel := newTelemetry(t)
	o := tel.obs
	o.Acquired(observe.Acquisition{Lock: "a", Kind: observe.Lock, Owner: "x:1", Count: 1, Wait: time.Second, Woken: observe.ByMessage})
	o.Released(observe.Hold{Lock: "a", Kind: observe.Lock, Owner: "x:1", Held: time.Second})
	o.LeaseLost(observe.Hold{Lock: "b", Kind: observe.Lock, Owner: "x:2", Held: time.Second})
	o.Abandoned(observe.Hold{Lock: "c", Kind: observe.Lock, Owner: "x:3", Held: time.Second})
	o.RenewalFailed(errors.New("down"))
	o.RenewalRecovered(time.Second)
	o.Reconnected(time.Second)
	ms := tel.collect(t)
	for name, unit := range map[string]string{
		"relock.lock.wait.duration":            "s",
		"relock.lock.hold.duration":            "s",
		"relock.wakeups":                       "{wakeup}",
		"relock.lease.lost":                    "{hold}",
		"relock.hold.abandoned":                "{hold}",
		"relock.lease.renewal.failures":        "{outage}",
		"relock.lease.renewal.recoveries":      "{outage}",
		"relock.lease.renewal.outage.duration": "s",
		"relock.pubsub.reconnects":             "{reconnect}",
		"relock.pubsub.outage.duration":        "s",
	} {
		m, ok := ms[name]
		if !ok {
			t.Errorf("no metric %s", name)
			continue
		}
		if m.Unit != unit {
			t.Errorf("%s: unit %q, want %q", name, m.Unit, unit)
		}
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			if unit != "s" {
				t.Errorf("%s is a histogram, want a counter", name)
			}
			for _, dp := range d.DataPoints {
				if b := dp.Bounds; len(b) == 0 || b[0] != 0.0005 || b[len(b)-1] != 1800 {
					t.Errorf("%s: bucket bounds %v, want from 0.0005 to 1800", name, b)
				}
			}
		case metricdata.Sum[int64]:
			if unit == "s" {
				t.Errorf("%s is a counter, want a histogram", name)
			}
			if !d.IsMonotonic {
				t.Errorf("%s is not monotonic", name)
			}
		default:
			t.Errorf("%s is a %T", name, m.Data)
		}
	}
}

// Without options, New records on the global providers, as they are when it is called.
// (The globals stay set: no other test of this package uses them.)
func TestGlobalProviders(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	obs, err := relockotel.New()
	if err != nil {
		t.Fatal(err)
	}
	obs.Acquired(observe.Acquisition{Lock: "a", Kind: observe.Write, Owner: "x:1", Count: 1, Wait: 2 * time.Second, Woken: observe.ByMessage})
	tel := &telemetry{obs: obs, reader: reader, spans: spans}
	dp := histogram(t, tel.collect(t), "relock.lock.wait.duration", kind(observe.Write), woken("message"))
	if dp.Count != 1 || dp.Sum != 2 {
		t.Errorf("wait: count %d sum %v, want 1 and 2", dp.Count, dp.Sum)
	}
	if n := len(spans.Ended()); n != 1 {
		t.Errorf("%d spans, want 1", n)
	}
}
