package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// --- Scale: relock's rlock as waiters, processes and holds grow

var (
	// scaleWaiters are the waiters of the one-process points.
	scaleWaiters = []int{1, 100, 1000, 5000}
	// scaleProcs are the processes of the multi-process points, which share scaleTotal
	// waiters evenly: what changes is how many clients the waiters are spread over.
	scaleProcs = []int{1, 2, 4, 8}
	// scaleHolds are the holds of the renewal points.
	scaleHolds = []int{1000, 10000, 50000}
)

const scaleTotal = 16

// scalePoint is one contended run of relock's rlock, empty critical section.
type scalePoint struct {
	procs, waiters int // processes, and waiters in each
	round          s2Round
	memPeak        int64 // highest used_memory during the run above its value before
}

// sentPerAcq, runPerAcq, memPerAcq and memPerWaiter are the point's figures. The memory
// peak holds what every acquisition of the window leaves behind on the server for longer
// than the window and what the waiters cost
// while they wait (connections, subscriptions), so it is divided both ways.
func (p scalePoint) sentPerAcq() float64 { return per(float64(sum(p.round.sent)), p.round.acq) }
func (p scalePoint) runPerAcq() float64  { return per(float64(sum(p.round.commands)), p.round.acq) }
func (p scalePoint) memPerAcq() float64  { return per(float64(p.memPeak), p.round.acq) }
func (p scalePoint) memPerWaiter() float64 {
	return per(float64(p.memPeak), int64(p.procs*p.waiters))
}

// sum adds up counts.
func sum(counts map[string]int64) int64 {
	var n int64
	for _, v := range counts {
		n += v
	}
	return n
}

type scaleResult struct {
	waiters []scalePoint // one process, by scaleWaiters
	procs   []scalePoint // by scaleProcs
	holds   []s5Result   // by scaleHolds
}

// runScale runs the scale points, each for dur, and the renewal points for ticks ticks.
func runScale(addr string, adm *admin, dur time.Duration, ticks uint64) (scaleResult, error) {
	var res scaleResult
	relockLib := libIndex("relock")
	lib := libraries()[relockLib]
	ctx := context.Background()
	// point runs one point between a memory watch's start and stop, and flushes after it.
	point := func(procs, waiters int, run func() (s2Round, error)) (scalePoint, error) {
		stop := adm.memoryPeak(ctx)
		r, err := run()
		peak, merr := stop()
		if err == nil {
			err = merr
		}
		if err == nil {
			err = adm.flush(ctx)
		}
		p := scalePoint{procs: procs, waiters: waiters, round: r, memPeak: peak}
		fmt.Fprintf(os.Stderr, "scale %d×%d %8.0f acq/s %5.1f sent/acq %5.1f run/acq\n", procs, waiters,
			float64(r.acq)/r.elapsed.Seconds(), p.sentPerAcq(), p.runPerAcq())
		return p, err
	}
	for _, w := range scaleWaiters {
		p, err := point(1, w, func() (s2Round, error) {
			return runS2(lib, addr, adm, w, fixed(dur), 0, false, fmt.Sprintf("scale:w%d", w))
		})
		if err != nil {
			return res, fmt.Errorf("%d waiters: %w", w, err)
		}
		res.waiters = append(res.waiters, p)
	}
	for _, n := range scaleProcs {
		c := mpConfig{procs: n, waiters: scaleTotal / n}
		p, err := point(c.procs, c.waiters, func() (s2Round, error) {
			return runS2Multi(relockLib, addr, adm, dur, c, fmt.Sprintf("scale:p%d", n))
		})
		if err != nil {
			return res, fmt.Errorf("%d processes: %w", n, err)
		}
		res.procs = append(res.procs, p)
	}
	for _, h := range scaleHolds {
		r, err := runS5(addr, adm, h, ticks)
		if err != nil {
			return res, fmt.Errorf("%d holds: %w", h, err)
		}
		if err := adm.flush(ctx); err != nil {
			return res, err
		}
		fmt.Fprintf(os.Stderr, "scale %d holds %5.1f calls/tick %6.0f server µs/tick\n", h, r.calls, r.serverUs)
		res.holds = append(res.holds, r)
	}
	return res, nil
}
