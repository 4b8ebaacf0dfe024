package main

import (
	"cmp"
	"net"
	"reflect"
	"slices"
	"testing"
)

// The counter finds the command names in requests however the writes split them, and a
// pipeline of several requests in one write counts each.
func TestCountingConnSplitsAndPipelines(t *testing.T) {
	req := "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n" +
		"*5\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$1\r\nk\r\n$0\r\n\r\n" +
		"*1\r\n$5\r\nMULTI\r\n"
	for step := 1; step <= len(req); step++ {
		s := newSentCommands()
		client, server := net.Pipe()
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := server.Read(buf); err != nil {
					return
				}
			}
		}()
		c := s.wrap(client)
		for i := 0; i < len(req); i += step {
			if _, err := c.Write([]byte(req[i:min(i+step, len(req))])); err != nil {
				t.Fatal(err)
			}
		}
		client.Close()
		server.Close()
		want := map[string]int64{"evalsha": 1, "multi": 1} // PING is keep-alive, left out
		if got := s.snapshot(); !reflect.DeepEqual(got, want) {
			t.Fatalf("writes of %d bytes: counted %v; want %v", step, got, want)
		}
	}
}

// An acquisition overtakes when someone who asked at least fifoMargin earlier got the lock
// later; asks closer together than that are not ordered.
func TestOvertakes(t *testing.T) {
	m := int64(fifoMargin)
	evs := []event{
		{Waiter: 0, Ask: 0, Acq: 10 * m},         // first asked, first served
		{Waiter: 1, Ask: m / 2, Acq: 11 * m},     // asked within the margin of 0: not ordered
		{Waiter: 2, Ask: 5 * m, Acq: 12 * m},     // ahead of 3, who asked three margins earlier
		{Waiter: 3, Ask: 2 * m, Acq: 20 * m},     // overtaken
		{Waiter: 4, Ask: 6 * m, Acq: 13 * m},     // ahead of 3 too
		{Waiter: 5, Ask: 2*m + m/2, Acq: 19 * m}, // ahead of 3, but asked within its margin
	}
	slices.SortFunc(evs, func(a, b event) int { return cmp.Compare(a.Acq, b.Acq) })
	if got := overtakes(evs); got != 2 {
		t.Fatalf("overtakes = %d; want 2 (waiters 2 and 4 got in ahead of waiter 3)", got)
	}
}

// An EVALSHA of a named script is counted under the script's name; other scripts and other
// commands keep their command's name.
func TestCountingConnNamesScripts(t *testing.T) {
	s := newSentScripts(map[string]string{"abc": "acquire"})
	client, server := net.Pipe()
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := server.Read(buf); err != nil {
				return
			}
		}
	}()
	defer server.Close()
	defer client.Close()
	c := s.wrap(client)
	req := "*3\r\n$7\r\nEVALSHA\r\n$3\r\nABC\r\n$1\r\n0\r\n" +
		"*3\r\n$7\r\nEVALSHA\r\n$3\r\ndef\r\n$1\r\n0\r\n" +
		"*3\r\n$6\r\nINCRBY\r\n$3\r\nabc\r\n$1\r\n1\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"evalsha acquire": 1, "evalsha": 1, "incrby": 1}
	if got := s.snapshot(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counted %v; want %v", got, want)
	}
}
