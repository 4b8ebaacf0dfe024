// Package owner carries lock owners in a context.Context: the Go answer to Redisson's
// thread ids. An owner is "<client uuid>:<n>", n counted per client, so the hash fields
// relock writes have the same shape as Redisson's "<uuid>:<threadId>".
//
// A context may carry owners of several clients at once (a goroutine that holds locks
// through two clients is one owner on each of them), so the value is a short immutable
// list of bindings, one per client, looked up by the client's Issuer.
package owner

import (
	"context"
	"strconv"
	"sync/atomic"
)

// Issuer hands out owners for one client. Its zero value is not usable; use NewIssuer.
type Issuer struct {
	prefix string // "<uuid>:"
	next   atomic.Uint64
}

// NewIssuer returns an Issuer whose owners are "<id>:<n>" with n = 1, 2, ...
func NewIssuer(id string) *Issuer {
	return &Issuer{prefix: id + ":"}
}

type key struct{}

// binding is one client's owner in a context. Bindings are never mutated, so a context
// can be shared by goroutines freely.
type binding struct {
	issuer *Issuer
	owner  string
	next   *binding
}

// Of returns the owner ctx carries for this issuer's client.
func (is *Issuer) Of(ctx context.Context) (string, bool) {
	b, _ := ctx.Value(key{}).(*binding)
	for ; b != nil; b = b.next {
		if b.issuer == is {
			return b.owner, true
		}
	}
	return "", false
}

// Ensure returns ctx and its owner if it carries one for this client; otherwise it binds a
// new owner and returns the derived context.
func (is *Issuer) Ensure(ctx context.Context) (context.Context, string) {
	if o, ok := is.Of(ctx); ok {
		return ctx, o
	}
	head, _ := ctx.Value(key{}).(*binding)
	n := is.next.Add(1)
	b := &binding{issuer: is, owner: is.prefix + strconv.FormatUint(n, 10), next: head}
	return context.WithValue(ctx, key{}, b), b.owner
}

// Fresh returns a context that carries no owner for any client, whatever ctx carries: the
// next acquisition through it starts a new owner.
func Fresh(ctx context.Context) context.Context {
	return context.WithValue(ctx, key{}, (*binding)(nil))
}
