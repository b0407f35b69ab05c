package providersim

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func mustLedgerDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := openLedger(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestBilling_MemberFailsAlone: in one group, a key reused for another
// request and a constraint failure fail their own calls; the group's
// other bills commit, a repeat of a key billed earlier in the same group
// included.
func TestBilling_MemberFailsAlone(t *testing.T) {
	db := mustLedgerDB(t)
	b := &billing{db: db}
	now := time.Unix(1_700_000_000, 0)
	key := sql.NullString{String: "k", Valid: true}
	first := entry{Key: key, RequestID: "r-k", RequestHash: "h1", Model: "m", Text: "t", Amount: 2000}
	msg := entry{RequestID: "r-msg", RequestHash: "h", Model: "m", Text: "t", Amount: 1000, SentKey: sql.NullString{String: "s", Valid: true}}
	reused := first
	reused.RequestHash = "h2"
	group := []*billReq{
		{e: first, now: now},
		{e: msg, each: true, now: now},
		{e: msg, each: true, now: now}, // same request id: UNIQUE fails
		{e: reused, now: now},          // same key, another request
		{e: first, now: now},           // same key, same request: a repeat
	}
	for _, r := range group {
		r.done = make(chan billed, 1)
	}
	b.commit(group)
	v := make([]billed, len(group))
	for i, r := range group {
		v[i] = <-r.done
	}
	if v[0].err != nil || !v[0].billed || v[0].stored.RequestID != "r-k" {
		t.Errorf("first = %+v, want billed as r-k", v[0])
	}
	if v[1].err != nil || v[1].stored.RequestID != "r-msg" {
		t.Errorf("message = %+v, want billed as r-msg", v[1])
	}
	if !ownFailure(v[2].err) || errors.Is(v[2].err, errKeyReused) {
		t.Errorf("duplicate message = %+v, want its own constraint error", v[2])
	}
	if !errors.Is(v[3].err, errKeyReused) {
		t.Errorf("reused key = %+v, want errKeyReused", v[3])
	}
	if v[4].err != nil || v[4].billed || v[4].stored.RequestID != "r-k" || v[4].stored.Calls != 2 {
		t.Errorf("repeat = %+v, want r-k unbilled, its second call", v[4])
	}
	l, err := readLedger(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 2 || l.TotalBills != 2 {
		t.Fatalf("ledger = %+v, want r-k and r-msg billed once each", l)
	}
	if e := l.Entries[0]; e.RequestID != "r-k" || e.Calls != 2 || e.Bills != 1 {
		t.Errorf("entry 0 = %+v, want r-k called twice, billed once", e)
	}
	if e := l.Entries[1]; e.RequestID != "r-msg" || e.Kind != KindMessages || e.SentKey != "s" {
		t.Errorf("entry 1 = %+v, want the message r-msg sent as s", e)
	}
}

// TestBilling_GroupFailsTogether: an error that is no bill's own (here the
// database is gone) fails every member of the group.
func TestBilling_GroupFailsTogether(t *testing.T) {
	db := mustLedgerDB(t)
	db.Close()
	b := &billing{db: db}
	group := []*billReq{
		{e: entry{RequestID: "a", RequestHash: "h"}, each: true, done: make(chan billed, 1)},
		{e: entry{RequestID: "b", RequestHash: "h"}, each: true, done: make(chan billed, 1)},
	}
	b.commit(group)
	for i, r := range group {
		if v := <-r.done; v.err == nil {
			t.Errorf("member %d = %+v, want the group's error", i, v)
		}
	}
}

// TestBilling_CloseRefusesLaterBills: after close the writer is gone and a
// bill is refused, unbilled, instead of waiting forever.
func TestBilling_CloseRefusesLaterBills(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the ledger's own cleanup closes it
	db := mustLedgerDB(t)
	b := newBilling(db)
	ctx := context.Background()
	if v := b.submit(ctx, entry{RequestID: "a", RequestHash: "h"}, true, time.Now()); v.err != nil {
		t.Fatalf("submit before close: %v", v.err)
	}
	b.close()
	b.close() // twice, as Server.Close may be
	if v := b.submit(ctx, entry{RequestID: "b", RequestHash: "h"}, true, time.Now()); !errors.Is(v.err, errLedgerClosing) {
		t.Errorf("submit after close = %+v, want errLedgerClosing", v)
	}
	l, err := readLedger(ctx, db)
	if err != nil || len(l.Entries) != 1 || l.Entries[0].RequestID != "a" {
		t.Errorf("ledger = %+v, %v; want only a", l, err)
	}
}
