package owner

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// carrying is a context that carries b, as a hold's context does.
type carrying struct {
	context.Context
	b *Binding
}

func (c carrying) Value(k any) any {
	if v, ok := Answer(c.b, k); ok {
		return v
	}
	return c.Context.Value(k)
}

// ensure returns a context derived from ctx that carries its owner for is, and the owner.
func ensure(is *Issuer, ctx context.Context) (context.Context, string) {
	o, carried, fresh := is.Own(ctx)
	if carried != nil {
		return ctx, o
	}
	return carrying{ctx, &fresh}, o
}

func TestOwners(t *testing.T) {
	a, b := NewIssuer("A"), NewIssuer("B")
	base := context.Background()
	if _, ok := a.Of(base); ok {
		t.Fatal("a plain context carries an owner")
	}
	c1, o1 := ensure(a, base)
	if o1 != "A:1" {
		t.Fatalf("first owner = %q; want A:1", o1)
	}
	if got, ok := a.Of(c1); !ok || got != o1 {
		t.Fatalf("a context carrying %s answers %q, %v", o1, got, ok)
	}
	if o, carried, _ := a.Own(c1); carried == nil || o != o1 {
		t.Errorf("Own on a context with an owner made a new one: %q", o)
	}
	if _, o := ensure(a, base); o != "A:2" {
		t.Errorf("a second plain context got %q; want A:2", o)
	}
	// The same context is a separate owner on another client, and keeps its first one.
	c2, ob := ensure(b, c1)
	if ob != "B:1" {
		t.Errorf("owner on the second client = %q; want B:1", ob)
	}
	if o, _ := a.Of(c2); o != o1 {
		t.Errorf("binding an owner on B lost the owner on A: %q", o)
	}
	// Fresh hides every owner.
	f := Fresh(c2)
	if _, ok := a.Of(f); ok {
		t.Error("Fresh context still carries A's owner")
	}
	if _, ok := b.Of(f); ok {
		t.Error("Fresh context still carries B's owner")
	}
	fa, o := ensure(a, f)
	if o == o1 {
		t.Error("Fresh context re-used the old owner")
	}
	// Its owner is the same for every lock taken through it, or a context derived from
	// it, and is one per client.
	if got, ok := a.Of(f); !ok || got != o {
		t.Errorf("Fresh context after its first lock carries %q, %v; want %q", got, ok, o)
	}
	if _, again := ensure(a, context.WithValue(f, testKey{}, 1)); again != o {
		t.Errorf("a second lock through a Fresh context's child got owner %q; want %q", again, o)
	}
	if got, ok := a.Of(fa); !ok || got != o {
		t.Errorf("the hold's context of a Fresh owner carries %q, %v; want %q", got, ok, o)
	}
	if _, ob := ensure(b, fa); ob == o || ob == "B:1" {
		t.Errorf("a Fresh context's owner on the second client = %q; want a new one", ob)
	}
}

type testKey struct{}

// The issuer hears of an owner once nothing names it: every context that carried it is
// unreachable. Until then it does not.
func TestOwnerGone(t *testing.T) {
	is := NewIssuer("g")
	gone := make(chan string, 4)
	is.OnGone(func(o string) { gone <- o })
	kept := Fresh(context.Background())
	keptOwner, _, _ := is.Own(kept)
	func() {
		dropped := Fresh(context.Background())
		o, _, _ := is.Own(dropped)
		if o == keptOwner {
			t.Fatal("two Fresh contexts share an owner")
		}
	}()
	deadline := time.After(10 * time.Second)
	for got := ""; got == ""; {
		runtime.GC()
		select {
		case got = <-gone:
			if got == keptOwner {
				t.Fatalf("owner %s reported gone while a context still carries it", got)
			}
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("the owner of an unreachable context was never reported gone")
		}
	}
	runtime.GC()
	select {
	case got := <-gone:
		t.Fatalf("owner %s reported gone; only the dropped one is", got)
	case <-time.After(50 * time.Millisecond):
	}
	runtime.KeepAlive(kept)
}

// Owners are made in batches of one string; each is its own "<id>:<n>", in order, across
// the batches' ends.
func TestOwnersAcrossBatches(t *testing.T) {
	is := NewIssuer("u")
	for n := 1; n <= 3*batchSize+1; n++ {
		o, _, _ := is.Own(context.Background())
		if want := "u:" + strconv.Itoa(n); o != want {
			t.Fatalf("owner %d = %q; want %q", n, o, want)
		}
	}
}

// A context that carries owners of several clients is one owner on each (the package's
// promise): a hold taken on a second client does not hide the first client's owner from
// a lock taken through the hold's context, which re-enters as that owner rather than
// being made a new one that would wait for itself.
func TestOwnFindsAnOwnerBehindAnotherClients(t *testing.T) {
	a, b, c := NewIssuer("A"), NewIssuer("B"), NewIssuer("C")
	ca, oa := ensure(a, context.Background())
	cb, _ := ensure(b, ca)
	cc, _ := ensure(c, cb)
	for _, ctx := range []context.Context{cb, cc} {
		o, carried, fresh := a.Own(ctx)
		if o != oa || carried == nil || fresh != (Binding{}) {
			t.Errorf("Own behind other clients' owners = %q, carried %v; want %q, carried", o, carried != nil, oa)
		}
	}
}
