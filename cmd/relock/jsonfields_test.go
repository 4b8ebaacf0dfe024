package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/redistest/relocktest"
)

// jsonObject decodes one JSON object of inspect --json as scripts read it: by its field
// names, spelled exactly.
func jsonObject(t *testing.T, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, text)
	}
	return m
}

// hasFields fails t unless the object has each of the fields; it returns the object.
func hasFields(t *testing.T, what string, v any, fields ...string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("inspect --json: %s is %v, not an object", what, v)
	}
	for _, f := range fields {
		if _, ok := m[f]; !ok {
			t.Errorf("inspect --json: %s has no field %q: %v", what, f, m)
		}
	}
	return m
}

// inspect --json spells its fields as docs/operations.md and the report's type name them,
// which scripts match exactly: a holder with its client (addr, ageSeconds, connections),
// the waiting clients (code, readers, clientId, client), subscribers, nameBase64 for a
// name that is not UTF-8, and clientsUnknown. Guards against a field renamed, which a
// test decoding into the report's own type would not notice.
func TestInspectJSONFieldNames(t *testing.T) {
	redistest.Real(t, func(t *testing.T, b *redistest.Backend) {
		ctx := redistest.Context(t, 2*time.Minute)
		holder, reader := tracedClient(t, b), tracedClient(t, b)
		wh, err := holder.RWLock("ledger").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read := async(func() error {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			h, err := reader.RWLock("ledger").RLock(rctx)
			if err != nil {
				return err
			}
			return reader.RWLock("ledger").RUnlock(h)
		})
		var r *Report
		var out string
		redistest.Eventually(t, 20*time.Second, "the reader's client is not traced", func() bool {
			out, r = inspectBinary(t, b, "--json", "ledger")
			return len(r.WaitingClients) == 1 && r.WaitingClients[0].Client != nil && r.Subscribers == 1 &&
				len(r.Owners) == 1 && r.Owners[0].Client != nil
		})
		m := hasFields(t, "the report", jsonObject(t, out), "name", "kind", "locked", "ttlMs", "mode", "owners", "subscribers", "waitingClients")
		if owners, _ := m["owners"].([]any); len(owners) == 1 {
			o := hasFields(t, "an owner", owners[0], "owner", "holds", "write", "client")
			hasFields(t, "an owner's client", o["client"], "addr", "ageSeconds", "connections")
		} else {
			t.Errorf("inspect --json ledger: owners %v; want one", m["owners"])
		}
		if ws, _ := m["waitingClients"].([]any); len(ws) == 1 {
			w := hasFields(t, "a waiting client", ws[0], "code", "readers", "clientId", "client")
			hasFields(t, "a waiting client's client", w["client"], "addr", "ageSeconds", "connections")
		} else {
			t.Errorf("inspect --json ledger: waitingClients %v; want one", m["waitingClients"])
		}
		if err := holder.RWLock("ledger").Unlock(wh); err != nil {
			t.Fatal(err)
		}
		await(t, "the reader", read)

		out, _ = relockCmd(t, b.Addr, "", "inspect", "--json", "ledger\xff")
		hasFields(t, "the report of a name that is not UTF-8", jsonObject(t, out), "name", "nameBase64")
	})

	// A server without CLIENT LIST: the report says why the clients are unknown.
	b := redistest.Mini(t)
	holdLock(t, relocktest.New(t, b), "orders")
	out, err := relockCmd(t, b.Addr, "", "inspect", "--json", "orders")
	if err != nil {
		t.Fatal(err, out)
	}
	hasFields(t, "the report on a server without CLIENT LIST", jsonObject(t, out), "clientsUnknown", "owners")
}
