package owner

import (
	"context"
	"strconv"
	"testing"
)

// carrying is a context that carries b, as a hold's context does.
type carrying struct {
	context.Context
	b *Binding
}

func (c carrying) Value(k any) any {
	if v, ok := c.b.Answer(k); ok {
		return v
	}
	return c.Context.Value(k)
}

// ensure returns a context derived from ctx that carries its owner for is, and the owner.
func ensure(is *Issuer, ctx context.Context) (context.Context, string) {
	b, carried := is.Own(ctx)
	if carried {
		return ctx, b.Owner()
	}
	return carrying{ctx, &b}, b.Owner()
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
	if bd, carried := a.Own(c1); !carried || bd.Owner() != o1 {
		t.Errorf("Own on a context with an owner made a new one: %q", bd.Owner())
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
	if _, o := ensure(a, f); o == o1 {
		t.Error("Fresh context re-used the old owner")
	}
}

// Owners are made in batches of one string; each is its own "<id>:<n>", in order, across
// the batches' ends.
func TestOwnersAcrossBatches(t *testing.T) {
	is := NewIssuer("u")
	for n := 1; n <= 3*batchSize+1; n++ {
		b, _ := is.Own(context.Background())
		if want := "u:" + strconv.Itoa(n); b.Owner() != want {
			t.Fatalf("owner %d = %q; want %q", n, b.Owner(), want)
		}
	}
}
