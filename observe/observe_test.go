package observe_test

import (
	"testing"

	"github.com/relock-go/relock/observe"
)

// Each outcome of a wait prints as what ended it (the constants' documentation); one this
// version does not know prints as "unknown".
func TestWokenNames(t *testing.T) {
	for w, want := range map[observe.Woken]string{
		observe.NotWaited: "not waited",
		observe.ByMessage: "message",
		observe.ByLease:   "lease",
		observe.ByBackOff: "back-off",
		observe.ByHandoff: "handoff",
		observe.Woken(-1): "unknown",
		observe.Woken(9):  "unknown",
	} {
		if got := w.String(); got != want {
			t.Errorf("Woken(%d).String() = %q, want %q", int(w), got, want)
		}
	}
}
