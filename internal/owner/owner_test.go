package owner

import (
	"context"
	"testing"
)

func TestOwners(t *testing.T) {
	a, b := NewIssuer("A"), NewIssuer("B")
	base := context.Background()
	if _, ok := a.Of(base); ok {
		t.Fatal("a plain context carries an owner")
	}
	c1, o1 := a.Ensure(base)
	if o1 != "A:1" {
		t.Fatalf("first owner = %q; want A:1", o1)
	}
	if c, o := a.Ensure(c1); c != c1 || o != o1 {
		t.Errorf("Ensure on a context with an owner made a new one: %q", o)
	}
	if _, o := a.Ensure(base); o != "A:2" {
		t.Errorf("a second plain context got %q; want A:2", o)
	}
	// The same context is a separate owner on another client, and keeps its first one.
	c2, ob := b.Ensure(c1)
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
	if _, o := a.Ensure(f); o == o1 {
		t.Error("Fresh context re-used the old owner")
	}
}
