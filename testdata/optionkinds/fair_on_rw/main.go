package main

import (
	"context"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/rwlock"
)

var _ = time.Second
var _ = fairlock.WithRefreshPeriod
var _ = rwlock.WithWriterPreference

func main() {
	var c *relock.Client
	ctx := context.Background()
	_ = ctx
	_ = c.RWLock("x", fairlock.WithRefreshPeriod(time.Second))
}
