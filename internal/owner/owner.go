// Package owner carries lock owners in a context.Context: the Go answer to Redisson's
// thread ids. An owner is "<client uuid>:<n>", n counted per client, so the hash fields
// relock writes have the same shape as Redisson's "<uuid>:<threadId>".
//
// A context may carry owners of several clients at once (a goroutine that holds locks
// through two clients is one owner on each of them), so the value is a short immutable
// list of bindings, one per client, looked up by the client's Issuer.
//
// An owner lives as long as something can name it: a context that carries it. When the
// last such context is gone, the owner's issuer hears of it (Issuer.OnGone), so that the
// holds nobody can release any more are not kept alive for ever. The object whose life
// is the owner's, its anchor, is the hold's context that made it (Watch), or the Token of
// a context made by Fresh.
package owner

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Issuer hands out owners for one client. Its zero value is not usable; use NewIssuer.
type Issuer struct {
	prefix string // "<uuid>:"

	mu    sync.Mutex
	n     uint64            // the last owner's number
	batch [batchSize]string // owners made ahead, in order
	next  int               // the first of batch not handed out; batchSize: none left
	gone  func(owner string)
}

// OnGone sets the function called, on a goroutine of the runtime's, some time after the
// last context that names one of this issuer's owners became unreachable. It must be set
// before any owner is issued, and must not block.
func (is *Issuer) OnGone(f func(owner string)) { is.gone = f }

// Watch makes the issuer hear (OnGone) when anchor, the object that every context naming
// owner keeps reachable, is gone. It is called once per owner.
func Watch[T any](is *Issuer, anchor *T, owner string) {
	if is != nil && is.gone != nil {
		runtime.AddCleanup(anchor, gone, goneOwner{is, owner})
	}
}

// goneOwner is what a cleanup needs: never the anchor itself.
type goneOwner struct {
	is    *Issuer
	owner string
}

func gone(g goneOwner) { g.is.gone(g.owner) }

// NewIssuer returns an Issuer whose owners are "<id>:<n>" with n = 1, 2, ...
func NewIssuer(id string) *Issuer {
	return &Issuer{prefix: id + ":", next: batchSize}
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
	if is.next == batchSize {
		// One allocation for batchSize owners: the builder's buffer becomes their text.
		var text strings.Builder
		text.Grow(batchSize * (len(is.prefix) + 20))
		var ends [batchSize]int
		var digits [20]byte
		for i := range ends {
			is.n++
			text.WriteString(is.prefix)
			text.Write(strconv.AppendUint(digits[:0], is.n, 10))
			ends[i] = text.Len()
		}
		all, start := text.String(), 0
		for i, end := range ends {
			is.batch[i], start = all[start:end], end
		}
		is.next = 0
	}
	o := is.batch[is.next]
	is.batch[is.next] = "" // the issuer keeps no owner's text alive once handed out
	is.next++
	return o
}

type key struct{}

// Binding is one client's owner as a context carries it: the owner, and behind it the
// bindings of other clients that the context already carried; or, for a context made by
// Fresh, a Token that stands for one owner on every client. A context carries a list when
// its Value answers the owners' key with its head (see Answer). Bindings are never
// mutated, so a context can be shared by goroutines freely.
type Binding struct {
	issuer *Issuer
	owner  string
	next   *Binding
	tok    *Token
}

// Token is the owner a context made by Fresh carries: one owner per client, made on the
// client's first lock through the context, and the same for every lock after it.
type Token struct {
	mu     sync.Mutex
	owners []Binding // one per issuer that made an owner for it; tok set to the token
}

// Owner returns the owner, "<client uuid>:<n>".
func (b *Binding) Owner() string { return b.owner }

// Answer is how the Value of a context that carries the list headed by b answers k: with
// b for the owners' key (ok true), and not at all for any other key (ok false: the
// context asks its parent).
func Answer(b *Binding, k any) (v any, ok bool) {
	if k == (key{}) && b != nil {
		return b, true
	}
	return nil, false
}

// Of returns the owner ctx carries for this issuer's client; a nil ctx carries none.
func (is *Issuer) Of(ctx context.Context) (string, bool) {
	if ctx == nil {
		return "", false
	}
	b, _ := ctx.Value(key{}).(*Binding)
	for ; b != nil; b = b.next {
		switch {
		case b.issuer == is:
			return b.owner, true
		case b.tok != nil:
			return b.tok.of(is)
		}
	}
	return "", false
}

// Own returns the owner of a hold taken with ctx. When ctx carries one for this issuer's
// client, carried is the list ctx carries, which the hold's context answers with too (it
// keeps the owner's anchor reachable). Otherwise the owner is new, and fresh is the
// binding that the hold's context must carry, with ctx's list behind it; the hold's
// context is then the owner's anchor (see Watch). The caller makes that context as part of
// something it allocates anyway: a binding costs no allocation of its own.
func (is *Issuer) Own(ctx context.Context) (owner string, carried *Binding, fresh Binding) {
	head, _ := ctx.Value(key{}).(*Binding)
	for o := head; o != nil; o = o.next {
		switch {
		case o.issuer == is:
			return o.owner, head, Binding{}
		case o.tok != nil:
			return o.tok.own(is), head, Binding{}
		}
	}
	b := Binding{issuer: is, owner: is.issue(), next: head}
	return b.owner, nil, b
}

// of returns the token's owner for is, if it has made one.
func (t *Token) of(is *Issuer) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.owners {
		if b.issuer == is {
			return b.owner, true
		}
	}
	return "", false
}

// own returns the token's owner for is, made on first use; the token is its anchor.
func (t *Token) own(is *Issuer) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.owners {
		if b.issuer == is {
			return b.owner
		}
	}
	o := is.issue()
	t.owners = append(t.owners, Binding{issuer: is, owner: o})
	Watch(is, t, o)
	return o
}

// Fresh returns a context that carries a new owner for every client, whatever ctx
// carries: each client makes its owner on the first lock taken through the context (or
// one derived from it), and every later lock through it is taken by that same owner. The
// owner lives as long as the returned context, or one derived from it, is reachable. A nil
// ctx is taken as context.Background().
func Fresh(ctx context.Context) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithValue(ctx, key{}, &Binding{tok: &Token{}})
}
