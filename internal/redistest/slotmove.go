package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slotMoveTimeout bounds each step of a slot move: migrating the slot's keys, and the
// wait until every node routes the slot to its new master.
const slotMoveTimeout = 30 * time.Second

// SlotMove is a hash slot being moved from one master to another, as `redis-cli
// --cluster reshard` moves it, one step at a time so that a test can act between the
// steps: StartSlotMove opens the move (the slot is MIGRATING on its master and IMPORTING
// on the new one), MigrateKeys moves the slot's keys with MIGRATE, and Finish gives the
// slot to the new master (CLUSTER SETSLOT ... NODE) on every master.
type SlotMove struct {
	c          *Cluster
	slot       string
	from, to   *Server
	fromID, id string // the node ids of from and to
}

// StartSlotMove opens the move of slot to the master to, which must be another master
// than the slot's own. While it is open, the slot's master answers a command whose keys
// are all gone with an ASK redirection to the new master, and one whose keys are partly
// gone with TRYAGAIN.
func (c *Cluster) StartSlotMove(t testing.TB, slot uint16, to *Server) *SlotMove {
	t.Helper()
	from := c.MasterOf(slot)
	if from == to {
		t.Fatalf("redistest: slot %d is already served by %s", slot, to.addr)
	}
	m := &SlotMove{c: c, slot: strconv.Itoa(int(slot)), from: from, to: to,
		fromID: nodeID(t, from), id: nodeID(t, to)}
	mustOK(t, to, "CLUSTER", "SETSLOT", m.slot, "IMPORTING", m.fromID)
	mustOK(t, from, "CLUSTER", "SETSLOT", m.slot, "MIGRATING", m.id)
	return m
}

// MigrateKeys moves every key of the slot to the new master with MIGRATE, a few at a
// time, until the old master has none left in it.
func (m *SlotMove) MigrateKeys(t testing.TB) {
	t.Helper()
	host, port, _ := strings.Cut(m.to.addr, ":")
	err := untilOK(slotMoveTimeout, func() error {
		keys, err := m.from.Do(t, "CLUSTER", "GETKEYSINSLOT", m.slot, "10").AsStrSlice()
		if err != nil || len(keys) == 0 {
			return err
		}
		args := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)
		if err := m.from.Do(t, args...).Error(); err != nil {
			return err
		}
		return fmt.Errorf("keys left in slot %s", m.slot)
	})
	if err != nil {
		t.Fatalf("redistest: migrate slot %s from %s to %s: %v", m.slot, m.from.addr, m.to.addr, err)
	}
}

// Finish migrates what keys are left and gives the slot to the new master on every
// master, the new one first, and waits until the cluster is healthy with every node's
// slot map naming the new master for the slot.
func (m *SlotMove) Finish(t testing.TB) {
	t.Helper()
	m.MigrateKeys(t)
	mustOK(t, m.to, "CLUSTER", "SETSLOT", m.slot, "NODE", m.id)
	mustOK(t, m.from, "CLUSTER", "SETSLOT", m.slot, "NODE", m.id)
	for _, s := range m.c.Masters() {
		if s != m.to && s != m.from {
			mustOK(t, s, "CLUSTER", "SETSLOT", m.slot, "NODE", m.id)
		}
	}
	slot, _ := strconv.Atoi(m.slot)
	err := untilOK(slotMoveTimeout, func() error {
		if err := m.c.healthErr(); err != nil {
			return err
		}
		for _, s := range m.c.nodes {
			view, err := slotsOf(s.addr)
			if err != nil {
				return err
			}
			for _, r := range view {
				if int(r.start) <= slot && slot <= int(r.end) && r.master != m.to.addr {
					return fmt.Errorf("%s routes slot %d to %s", s.addr, slot, r.master)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: slot %s not moved to %s within %v: %v", m.slot, m.to.addr, slotMoveTimeout, err)
	}
}

// nodeID returns s's cluster node id.
func nodeID(t testing.TB, s *Server) string {
	t.Helper()
	id, err := s.Do(t, "CLUSTER", "MYID").ToString()
	if err != nil {
		t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.addr, err)
	}
	return id
}

// mustOK runs a command on s and fails the test if it does not succeed.
func mustOK(t testing.TB, s *Server, args ...string) {
	t.Helper()
	if err := s.Do(t, args...).Error(); err != nil {
		t.Fatalf("redistest: %s on %s: %v", strings.Join(args, " "), s.addr, err)
	}
}
