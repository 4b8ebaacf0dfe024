package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/embedded"
)

// A Server that Start did not make (a zero value, or a nil pointer) has no Redis: its
// calls answer as such, with relock's error for a value no client made, and never panic.
func TestUnmadeServer(t *testing.T) {
	for _, v := range []struct {
		what string
		s    *embedded.Server
	}{{"zero", new(embedded.Server)}, {"nil", nil}} {
		t.Run(v.what, func(t *testing.T) {
			s := v.s
			if addr := s.Addr(); addr != "" {
				t.Errorf("Addr() = %q; want \"\"", addr)
			}
			if rc := s.Redis(); rc != nil {
				t.Errorf("Redis() = %v; want nil", rc)
			}
			c, err := s.NewClient()
			if !errors.Is(err, relock.ErrInvalidOption) || c != nil {
				t.Errorf("NewClient() = %v, %v; want nil and an error that is ErrInvalidOption", c, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := s.Client().Lock("unmade").TryLock(ctx); !errors.Is(err, relock.ErrInvalidOption) {
				t.Errorf("Client().Lock(...).TryLock: %v; want an error that is ErrInvalidOption", err)
			}
			s.Close()
			s.Close()
		})
	}
}

// Close may be called twice: the second call finds everything closed and does nothing.
func TestCloseTwice(t *testing.T) {
	s, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewClient(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close()
	if c, err := s.NewClient(); !errors.Is(err, relock.ErrClosed) || c != nil {
		t.Errorf("NewClient after Close = %v, %v; want nil and an error that is ErrClosed", c, err)
	}
}
