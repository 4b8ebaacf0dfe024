// Package relockotel turns what a relock client does with its locks into OpenTelemetry
// metrics and spans. It lives in a module of its own, so that programs that do not use
// OpenTelemetry do not carry it:
//
//	obs, err := relockotel.New() // the global MeterProvider and TracerProvider
//	if err != nil { ... }
//	client, err := relock.New(rc, relock.WithObserver(obs))
//
// # Metrics
//
// Durations are in seconds, as floating-point histograms. Every instrument belongs to the
// meter named ScopeName.
//
//	relock.lock.wait.duration          histogram, s   relock.lock.kind, relock.lock.woken
//	relock.lock.hold.duration          histogram, s   relock.lock.kind, relock.hold.end
//	relock.wakeups                     counter        relock.lock.kind, relock.lock.woken
//	relock.lease.lost                  counter        relock.lock.kind
//	relock.hold.abandoned              counter        relock.lock.kind
//	relock.lease.renewal.failures      counter
//	relock.lease.renewal.recoveries    counter
//	relock.lease.renewal.outage.duration  histogram, s
//	relock.pubsub.reconnects           counter
//	relock.pubsub.outage.duration      histogram, s
//
// relock.lock.kind is the kind of lock (observe.Kind: "lock", "fairlock", "spinlock",
// "read", "write", or "lease" for a semaphore's leased permits, whose holds end as a
// lock's do). relock.lock.woken is what ended the wait: "message" (a release's wake-up),
// "lease" (the holder's lease was due to run out), "back_off" (a spin lock's waiter tried
// again after its back-off), "handoff" (a release in the waiter's own client handed it the
// lock) or "not_waited" (the lock was got without parking). relock.wakeups counts the acquisitions that parked, by what woke them:
// it is relock.lock.wait.duration's count without "not_waited". relock.hold.end is how a
// hold ended: "released", "lost" or "abandoned".
//
// The wait of every acquisition is recorded, re-entries (whose wait is one round trip)
// included. The hold duration is recorded once per hold, when the owner's last hold of
// the lock ends.
//
// The lock's name and its owner are never metric attributes: both are unbounded (a lock
// per order, an owner per request), and each value would make a time series of its own.
// They are on the spans, which are not aggregated.
//
// # Spans
//
// Each acquisition that parked to wait for the lock (woken by a message or by the lease)
// gets one span, named "relock wait", from the Lock call to the grant, with the
// attributes relock.lock.name, relock.lock.kind, relock.lock.woken, relock.lock.owner and
// relock.lock.hold_count. An acquisition that did not park gets none: it is one round
// trip, and a span per lock call would swamp a trace.
//
// The limits of an observer, which hears of an acquisition only once it has succeeded,
// and is given no context:
//
//   - The span is made after the fact: it starts at the time of the event minus the
//     reported wait (trace.WithTimestamp), and ends at the time of the event.
//   - It is a root span in a trace of its own: the Lock call's context, and the span it
//     may carry, do not reach the observer, so the wait cannot be a child of the caller's
//     span.
//   - A wait that fails (its context ends, its wait bound passes, the client closes) is
//     not heard of, and gets no span and no relock.lock.wait.duration measurement.
//
// # Cost
//
// The client calls its observer synchronously, on the goroutine that did the work, and
// sometimes with the watchdog's lock held: each method here records a measurement or two
// with attribute sets made in New, and makes no span but for a wait. Nothing blocks, as
// long as the SDK's exporters are asynchronous (a BatchSpanProcessor, a PeriodicReader),
// as they should be.
package relockotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/relock-go/relock/observe"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/relock-go/relock/otel"

// The attribute keys.
const (
	KeyKind      = attribute.Key("relock.lock.kind")
	KeyWoken     = attribute.Key("relock.lock.woken")
	KeyHoldEnd   = attribute.Key("relock.hold.end")
	KeyName      = attribute.Key("relock.lock.name")       // spans only
	KeyOwner     = attribute.Key("relock.lock.owner")      // spans only
	KeyHoldCount = attribute.Key("relock.lock.hold_count") // spans only
)

// SpanName is the name of the span of a wait.
const SpanName = "relock wait"

// durationBuckets are the histograms' bucket bounds in seconds: from a loopback round
// trip to a lock held for many minutes.
var durationBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800,
}

// Option configures an Observer.
type Option func(*config)

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider sets where the metrics go (default: otel.GetMeterProvider(), as it is
// when New is called).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets where the spans go (default: otel.GetTracerProvider(), as it is
// when New is called).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// base lets Observer embed observe.Base without exporting it: an event that a later
// observe.Observer adds is ignored here rather than breaking the build. (Today every
// method of Base is overridden, hence unused.)
//
//lint:ignore U1000 kept for the methods observe.Observer may gain
type base = observe.Base

// Observer records a relock client's events as OpenTelemetry metrics and spans. It
// implements observe.Observer; give it to relock.WithObserver. One Observer may serve
// several clients: their measurements add up.
type Observer struct {
	base //lint:ignore U1000 see base

	tracer trace.Tracer

	wait, hold         metric.Float64Histogram
	wakeups            metric.Int64Counter
	lost, abandoned    metric.Int64Counter
	renewFail, renewOK metric.Int64Counter
	renewOutage        metric.Float64Histogram
	reconnects         metric.Int64Counter
	pubsubOutage       metric.Float64Histogram
	kinds              map[observe.Kind]*kindAttrs // read-only after New
	noAttrs            metric.MeasurementOption
}

// kindAttrs are the attribute sets of one kind of lock, made once.
type kindAttrs struct {
	kind  metric.MeasurementOption
	wait  [nWoken]metric.MeasurementOption // by observe.Woken
	hold  [nEnds]metric.MeasurementOption  // by holdEnd
	kv    attribute.KeyValue
	woken [nWoken]attribute.KeyValue
}

const nWoken = 5 // observe.NotWaited, ByMessage, ByLease, ByBackOff, ByHandoff

type holdEnd int

const (
	released holdEnd = iota
	lost
	abandoned
	nEnds
)

var endNames = [nEnds]string{released: "released", lost: "lost", abandoned: "abandoned"}

// wokenValue is relock.lock.woken's value for w.
func wokenValue(w observe.Woken) string {
	switch w {
	case observe.NotWaited:
		return "not_waited"
	case observe.ByMessage:
		return "message"
	case observe.ByLease:
		return "lease"
	case observe.ByBackOff:
		return "back_off"
	case observe.ByHandoff:
		return "handoff"
	}
	return "unknown"
}

func newKindAttrs(k observe.Kind) *kindAttrs {
	kv := KeyKind.String(string(k))
	a := &kindAttrs{kind: metric.WithAttributeSet(attribute.NewSet(kv)), kv: kv}
	for w := range nWoken {
		a.woken[w] = KeyWoken.String(wokenValue(observe.Woken(w)))
		a.wait[w] = metric.WithAttributeSet(attribute.NewSet(kv, a.woken[w]))
	}
	for e := range nEnds {
		a.hold[e] = metric.WithAttributeSet(attribute.NewSet(kv, KeyHoldEnd.String(endNames[e])))
	}
	return a
}

// New returns an Observer that records on the providers opts name, or on the global ones.
func New(opts ...Option) (*Observer, error) {
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	m := cfg.mp.Meter(ScopeName)
	o := &Observer{
		tracer:  cfg.tp.Tracer(ScopeName),
		kinds:   make(map[observe.Kind]*kindAttrs),
		noAttrs: metric.WithAttributeSet(attribute.NewSet()),
	}
	for _, k := range []observe.Kind{observe.Lock, observe.FairLock, observe.SpinLock, observe.Read, observe.Write, observe.Lease} {
		o.kinds[k] = newKindAttrs(k)
	}
	var err error
	histogram := func(name, desc string) metric.Float64Histogram {
		if err != nil {
			return nil
		}
		var h metric.Float64Histogram
		h, err = m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	o.wait = histogram("relock.lock.wait.duration",
		"Time from a Lock or TryLock call to the grant, for the calls that got the lock.")
	o.hold = histogram("relock.lock.hold.duration",
		"Time from the acquisition of a hold to its end: released, lost or abandoned.")
	o.wakeups = counter("relock.wakeups", "{wakeup}",
		"Acquisitions that waited, by what ended the wait: a release's message or the holder's lease.")
	o.lost = counter("relock.lease.lost", "{hold}",
		"Holds found lost: the owner's hold gone from Redis, or its lease run out unrenewed.")
	o.abandoned = counter("relock.hold.abandoned", "{hold}",
		"Holds no context could release any more: no longer renewed, they free when their leases run out.")
	o.renewFail = counter("relock.lease.renewal.failures", "{outage}",
		"Rounds of lease renewals that failed after the last one succeeded.")
	o.renewOK = counter("relock.lease.renewal.recoveries", "{outage}",
		"Rounds of lease renewals that succeeded after failing ones.")
	o.renewOutage = histogram("relock.lease.renewal.outage.duration",
		"How long lease renewals failed, recorded when they succeed again.")
	o.reconnects = counter("relock.pubsub.reconnects", "{reconnect}",
		"Times the subscriber connection came back after it was lost.")
	o.pubsubOutage = histogram("relock.pubsub.outage.duration",
		"How long the subscriber connection was lost, recorded when it is back.")
	if err != nil {
		return nil, err
	}
	return o, nil
}

var _ observe.Observer = (*Observer)(nil)

// attrs returns the attribute sets of kind k.
func (o *Observer) attrs(k observe.Kind) *kindAttrs {
	if a := o.kinds[k]; a != nil {
		return a
	}
	return newKindAttrs(k) // a kind this package does not know yet
}

// Acquired records the acquisition's wait, counts its wake-up, and, when it waited, makes
// its span.
func (o *Observer) Acquired(a observe.Acquisition) {
	ka := o.attrs(a.Kind)
	w := a.Woken
	if w < 0 || w >= nWoken {
		// An outcome this package does not know yet.
		wkv := KeyWoken.String(wokenValue(w))
		opt := metric.WithAttributeSet(attribute.NewSet(ka.kv, wkv))
		o.wait.Record(context.Background(), a.Wait.Seconds(), opt)
		o.wakeups.Add(context.Background(), 1, opt)
		o.span(a, ka.kv, wkv)
		return
	}
	o.wait.Record(context.Background(), a.Wait.Seconds(), ka.wait[w])
	if w == observe.NotWaited {
		return
	}
	o.wakeups.Add(context.Background(), 1, ka.wait[w])
	o.span(a, ka.kv, ka.woken[w])
}

// span makes the span of a's wait, which ended now.
func (o *Observer) span(a observe.Acquisition, kind, woken attribute.KeyValue) {
	end := time.Now()
	_, s := o.tracer.Start(context.Background(), SpanName,
		trace.WithTimestamp(end.Add(-a.Wait)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(KeyName.String(a.Lock), kind, woken, KeyOwner.String(a.Owner), KeyHoldCount.Int64(a.Count)))
	s.End(trace.WithTimestamp(end))
}

// Released records the hold's duration.
func (o *Observer) Released(h observe.Hold) {
	o.hold.Record(context.Background(), h.Held.Seconds(), o.attrs(h.Kind).hold[released])
}

// LeaseLost counts the lost hold and records its duration.
func (o *Observer) LeaseLost(h observe.Hold) {
	ka := o.attrs(h.Kind)
	o.lost.Add(context.Background(), 1, ka.kind)
	o.hold.Record(context.Background(), h.Held.Seconds(), ka.hold[lost])
}

// Abandoned counts the abandoned hold and records its duration.
func (o *Observer) Abandoned(h observe.Hold) {
	ka := o.attrs(h.Kind)
	o.abandoned.Add(context.Background(), 1, ka.kind)
	o.hold.Record(context.Background(), h.Held.Seconds(), ka.hold[abandoned])
}

// RenewalFailed counts a round of renewals failing. The error is not an attribute: its
// text is unbounded; the client logs it.
func (o *Observer) RenewalFailed(error) {
	o.renewFail.Add(context.Background(), 1, o.noAttrs)
}

// RenewalRecovered counts renewals recovering and records how long they failed.
func (o *Observer) RenewalRecovered(down time.Duration) {
	o.renewOK.Add(context.Background(), 1, o.noAttrs)
	o.renewOutage.Record(context.Background(), down.Seconds(), o.noAttrs)
}

// Reconnected counts the subscriber connection coming back and records how long it was
// lost.
func (o *Observer) Reconnected(down time.Duration) {
	o.reconnects.Add(context.Background(), 1, o.noAttrs)
	o.pubsubOutage.Record(context.Background(), down.Seconds(), o.noAttrs)
}
