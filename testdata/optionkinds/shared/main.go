package main

import (
	"context"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/rwlock"
)

// Every kind takes rlock's options, and its own.
func main() {
	var c *relock.Client
	ctx := context.Background()
	_ = c.Lock("x", rlock.WithLease(time.Second), rlock.WithFencing(), rlock.WithWaitTimeout(time.Second))
	_ = c.FairLock("x", rlock.WithLease(time.Second), fairlock.WithRefreshPeriod(time.Second))
	_ = c.RWLock("x", rlock.WithFencing(), rwlock.WithWriterPreference(), rwlock.WithRefreshPeriod(time.Second))
	_, _ = c.FairLock("x").Lock(ctx, rlock.WithWaitTimeout(time.Second))
	_, _ = c.RWLock("x").RLock(ctx, rlock.WithLease(time.Second), rwlock.WithWriterPreference())
}
