package main

import (
	_ "embed"
	"fmt"
	"strings"
	"time"
)

// analysis is the hand-written account of the targets the runs miss: what the profiles
// show and what would close the gap. It is written into the report after the targets.
//
//go:embed analysis.md
var analysis string

// target is one of the performance targets relock is held to, with what a run measured.
type target struct {
	what     string
	measured string
	met      bool
}

// targets checks the run against relock's published targets.
func (r *report) targets() []target {
	idx := map[string]int{}
	for i, l := range r.libs {
		idx[l.name] = i
	}
	var ts []target
	for _, c := range []struct {
		peer string
		want float64
	}{{"rueidislock", 1}, {"redsync", 2}, {"redislock", 2}, {"raw scripts", 0.7}} {
		got := r.s1Ratio(idx["relock"], idx[c.peer])
		ts = append(ts, target{fmt.Sprintf("S1 cycles/s: relock at least %.1f× %s", c.want, c.peer),
			fmt.Sprintf("%.2f× (median of the rounds' ratios)", got), got >= c.want})
	}

	handoff := func(name string) time.Duration {
		h := totals(r.s2[2][idx[name]]).handoffs
		if len(h) == 0 {
			return 0
		}
		return percentile(h, 50)
	}
	base := handoff("relock")
	for _, peer := range []string{"redsync", "redislock"} {
		p := handoff(peer)
		ok := base > 0 && p >= 10*base
		got := "-"
		if base > 0 {
			got = fmt.Sprintf("%s against %s: %.0f×", ms(p), ms(base), float64(p)/float64(base))
		}
		ts = append(ts, target{"S2 handoff p50 (releaser steps aside): at least 10× lower than " + peer + " at its defaults", got, ok})
	}
	if r.env.idleRTT > 0 {
		tt := totals(r.s2[2][idx["relock"]])
		if len(tt.handoffs) > 0 && len(tt.fromCall) > 0 {
			p50, call := percentile(tt.handoffs, 50), percentile(tt.fromCall, 50)
			ret := float64(p50) / float64(r.env.idleRTT)
			ts = append(ts, target{"S2 handoff p50 within 3 round trips",
				fmt.Sprintf("%s = %.1f round trips of %v (%.1f of the back-to-back %v); from Unlock being called %s = %.1f",
					ms(p50), ret, r.env.idleRTT.Round(time.Microsecond), float64(p50)/float64(r.env.rtt), r.env.rtt.Round(time.Microsecond),
					ms(call), float64(call)/float64(r.env.idleRTT)),
				ret <= 3})
		}
	}
	worst, at := 0.0, ""
	for mi, m := range s2Modes[:2] {
		if v := totals(r.s2[mi][idx["relock"]]).sentPerAcq; v > worst {
			worst, at = v, m.name
		}
	}
	ts = append(ts, target{"S2 at most 4 commands sent per acquisition, 16 waiters in one process",
		fmt.Sprintf("%.1f (worst run: %s)", worst, at), worst <= 4})
	ts = append(ts, target{"S5 at most 100 calls and one round trip per renewal tick for 10,000 holds",
		fmt.Sprintf("%.1f calls, %.1f round trips", r.s5.calls, r.s5.batches), r.s5.calls <= 100 && r.s5.batches <= 1})
	return ts
}

func (r *report) writeTargets(b *strings.Builder) {
	b.WriteString("## Targets\n\nrelock's performance targets, checked against this run.\n\n")
	t := newTable("target", "measured", "verdict")
	for _, tg := range r.targets() {
		verdict := "met"
		if !tg.met {
			verdict = "**missed**"
		}
		t.row(tg.what, tg.measured, verdict)
	}
	b.WriteString(t.b.String() + "\n")
	b.WriteString(strings.TrimSpace(analysis) + "\n\n")
}
