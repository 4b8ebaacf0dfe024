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
	"sync"
)

// Issuer hands out owners for one client. Its zero value is not usable; use NewIssuer.
type Issuer struct {
	prefix string // "<uuid>:"

	mu    sync.Mutex
	n     uint64   // the last owner's number
	batch []string // owners made ahead, in order
}

// NewIssuer returns an Issuer whose owners are "<id>:<n>" with n = 1, 2, ...
func NewIssuer(id string) *Issuer {
	return &Issuer{prefix: id + ":"}
}

// batchSize is how many owners an Issuer makes at once: their text is one string, so a
// new owner costs no allocation of its own, which matters on the hot path (every Lock
// with a context that carries no owner makes one). An owner keeps its batch's text alive,
// a few kilobytes.
const batchSize = 64

// issue returns the next owner.
func (is *Issuer) issue() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	if len(is.batch) == 0 {
		buf := make([]byte, 0, batchSize*(len(is.prefix)+20))
		ends := make([]int, batchSize)
		for i := range ends {
			is.n++
			buf = strconv.AppendUint(append(buf, is.prefix...), is.n, 10)
			ends[i] = len(buf)
		}
		text := string(buf)
		is.batch = make([]string, batchSize)
		start := 0
		for i, end := range ends {
			is.batch[i], start = text[start:end], end
		}
	}
	o := is.batch[0]
	is.batch = is.batch[1:]
	return o
}

type key struct{}

// Binding is one client's owner as a context carries it: the owner, and behind it the
// bindings of other clients that the context already carried. A context carries a binding
// when its Value answers the owners' key with it (see Answer). Bindings are never mutated,
// so a context can be shared by goroutines freely.
type Binding struct {
	issuer *Issuer
	owner  string
	next   *Binding
}

// Owner returns the owner, "<client uuid>:<n>".
func (b *Binding) Owner() string { return b.owner }

// Answer is how the Value of a context that carries b answers k: with b for the owners'
// key (ok true), and not at all for any other key (ok false: the context asks its parent).
// The zero Binding answers nothing.
func (b *Binding) Answer(k any) (v any, ok bool) {
	if k == (key{}) && b.issuer != nil {
		return b, true
	}
	return nil, false
}

// Of returns the owner ctx carries for this issuer's client.
func (is *Issuer) Of(ctx context.Context) (string, bool) {
	b, _ := ctx.Value(key{}).(*Binding)
	for ; b != nil; b = b.next {
		if b.issuer == is {
			return b.owner, true
		}
	}
	return "", false
}

// Own returns the binding that a context derived from ctx carries for this issuer's
// client: the owner ctx carries (carried is then true), or a new owner, with ctx's
// bindings of other clients behind it. The caller makes the context that carries it,
// typically as part of something it allocates anyway (a hold's context): a binding costs
// no allocation of its own.
func (is *Issuer) Own(ctx context.Context) (b Binding, carried bool) {
	head, _ := ctx.Value(key{}).(*Binding)
	for o := head; o != nil; o = o.next {
		if o.issuer == is {
			return *o, true
		}
	}
	return Binding{issuer: is, owner: is.issue(), next: head}, false
}

// Fresh returns a context that carries no owner for any client, whatever ctx carries: the
// next acquisition through it starts a new owner.
func Fresh(ctx context.Context) context.Context {
	return context.WithValue(ctx, key{}, (*Binding)(nil))
}
