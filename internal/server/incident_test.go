package server_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

type objectInfo struct {
	Name, Store, Bucket, Key, VersionId, RetainUntil string
	Uploaded, LegalHold                              bool
}

func (e *env) waitDrained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ready struct{ OutboxDepth int }
		e.call(t, "GET", "/readyz", "", nil, &ready)
		if ready.OutboxDepth == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox still holds %d entries", ready.OutboxDepth)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An incident on an action two years old, then closed: its evidence is
// under legal hold in S3 while open and cannot be deleted; closing extends
// retention to the later of the close plus 12 months and the 18 months its
// money-moved action keeps it from when it was recorded (here the later),
// and releases the hold.
func TestIncidentLifecycleOnS3(t *testing.T) {
	bucket := s3test.Bucket()
	e := newEnv(t, jose.ES256, withS3(bucket))
	at := time.Now().UTC().AddDate(-2, 0, 0).Truncate(time.Second)
	var inc appendReply
	recorded := time.Now().UTC()
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "I-1", At: at, ScopesUsed: []string{"plan:change"}})), &inc)
	if inc.Row.Status != "ROW_STATUS_INCIDENT" || inc.Row.IncidentID == "" || inc.Row.RetainUntil != "" {
		t.Fatalf("incident row: %s %q until %q", inc.Row.Status, inc.Row.IncidentID, inc.Row.RetainUntil)
	}
	// The same agent platform's other rows that day, and one the day after.
	for i, d := range []time.Duration{time.Hour, 2 * time.Hour, 26 * time.Hour} {
		e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "O-" + itoa(i), At: at.Truncate(24 * time.Hour).Add(d), Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})), nil)
	}
	e.waitDrained(t)

	var list struct {
		Incidents []struct {
			ID   string `json:"id"`
			Open bool
		}
	}
	if code := e.call(t, "GET", "/v1/incidents", "auditor", nil, &list); code != 200 || len(list.Incidents) != 1 || !list.Incidents[0].Open {
		t.Fatalf("incidents = %d %+v", code, list)
	}
	var got struct {
		Incident struct {
			ID, Reason, RetainUntil string
			Open                    bool
			HeldObjects             []string
		}
		Row          Row
		SameDayRows  []Row
		SameDayCount int
	}
	if code := e.call(t, "GET", "/v1/incidents/"+inc.Row.IncidentID, "support", nil, &got); code != 200 || got.Row.ID != inc.Row.ID ||
		got.SameDayCount != 2 || got.Incident.Reason == "" || len(got.Incident.HeldObjects) != 3 {
		t.Fatalf("incident = %d %+v", code, got)
	}

	c, err := minio.New(s3srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3srv.AccessKey, s3srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	objects := func() []objectInfo {
		var ev struct{ Objects []objectInfo }
		e.call(t, "GET", "/v1/rows/"+inc.Row.ID+"/evidence", "auditor", nil, &ev)
		return ev.Objects
	}
	for _, o := range objects() {
		st, err := c.StatObject(ctx, bucket, o.Key, minio.StatObjectOptions{VersionID: o.VersionId})
		if err != nil {
			t.Fatal(err)
		}
		if st.Metadata.Get("X-Amz-Object-Lock-Legal-Hold") != "ON" || !o.LegalHold {
			t.Fatalf("%s not under legal hold while the incident is open", o.Key)
		}
		if err := c.RemoveObject(ctx, bucket, o.Key, minio.RemoveObjectOptions{VersionID: o.VersionId}); err == nil {
			t.Fatalf("deleted %s under an open incident", o.Key)
		}
	}

	if code := e.call(t, "POST", "/v1/incidents/"+inc.Row.IncidentID+":close", "support", map[string]any{"note": "x"}, nil); code != 403 {
		t.Fatalf("support closing = %d", code)
	}
	closedAt := time.Now().UTC()
	var closed struct {
		Incident struct {
			Open        bool
			RetainUntil string
			ClosedBy    string
		}
	}
	if code := e.call(t, "POST", "/v1/incidents/"+inc.Row.IncidentID+":close", "admin", map[string]any{"note": "platform fixed its scope handling"}, &closed); code != 200 || closed.Incident.Open || closed.Incident.ClosedBy != "admin-key" {
		t.Fatalf("close = %d %+v", code, closed)
	}
	until, _ := time.Parse(time.RFC3339, closed.Incident.RetainUntil)
	want := recorded.AddDate(0, 18, 0)
	if want.Before(closedAt.AddDate(1, 0, 0)) {
		t.Fatal("test clock arithmetic")
	}
	if d := until.Sub(want); d < -time.Minute || d > time.Minute {
		t.Fatalf("retain until %v, want 18 months from when the row was recorded (%v)", until, want)
	}
	if code := e.call(t, "POST", "/v1/incidents/"+inc.Row.IncidentID+":close", "admin", map[string]any{}, nil); code != 400 {
		t.Fatalf("closing twice = %d", code)
	}
	var row struct{ Row Row }
	e.call(t, "GET", "/v1/rows/"+inc.Row.ID, "auditor", nil, &row)
	if row.Row.RetainUntil != closed.Incident.RetainUntil {
		t.Fatalf("row retain until %q, incident %q", row.Row.RetainUntil, closed.Incident.RetainUntil)
	}
	e.waitDrained(t)
	for _, o := range objects() {
		st, err := c.StatObject(ctx, bucket, o.Key, minio.StatObjectOptions{VersionID: o.VersionId})
		if err != nil {
			t.Fatal(err)
		}
		if st.Metadata.Get("X-Amz-Object-Lock-Legal-Hold") == "ON" || o.LegalHold {
			t.Fatalf("%s still held after close", o.Key)
		}
		got, _ := time.Parse(time.RFC3339, st.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
		if got.Before(until.Add(-time.Second)) {
			t.Fatalf("%s retained until %v, want at least %v", o.Key, got, until)
		}
		if err := c.RemoveObject(ctx, bucket, o.Key, minio.RemoveObjectOptions{VersionID: o.VersionId}); err == nil {
			t.Fatalf("deleted %s before its extended retention", o.Key)
		}
	}
}

// recordAt records r in e's row store as a ledger whose clock reads at
// would have (retention counts from when a row was recorded); ledgerd is
// stopped meanwhile and started again after.
func (e *env) recordAt(t *testing.T, at time.Time, r *pacttest.Receipt) *ledger.Row {
	t.Helper()
	e.stop()
	store, err := bolt.Open(filepath.Join(e.cfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := localdir.Open(filepath.Join(e.cfg.DataDir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: e.sc.Audience})
	l, err := ledger.New(store, objects, v, e.sc.Static(at), ledger.Config{Now: func() time.Time { return at }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// As ledgerd would, with its log: the row's leaf waits for ledgerd's
	// integrator.
	signer, vkey, err := config.ReadLogKey(&e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.EnableLog(ledger.LogConfig{Signer: signer, VerifierKey: vkey}); err != nil {
		t.Fatal(err)
	}
	row, _, err := l.AppendReceipt(context.Background(), ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
	if err != nil {
		t.Fatal(err)
	}
	// A row recorded that long ago had its objects uploaded long since.
	if err := storetest.DrainOutbox(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	return row
}

func TestSweptRowIsGone(t *testing.T) {
	e := newEnv(t, jose.ES256)
	old := time.Now().UTC().AddDate(-1, 0, 0)
	r := e.sc.Mint(pacttest.Spec{Target: "OLD-1", At: old, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	id := e.recordAt(t, old, r).ID
	// ledgerd sweeps at start-up: the row recorded a year ago goes.
	var gone struct{ Message string }
	deadline := time.Now().Add(10 * time.Second)
	for {
		code := e.call(t, "GET", "/v1/rows/"+id, "support", nil, &gone)
		if code == 410 {
			break
		}
		if code != 200 || time.Now().After(deadline) {
			t.Fatalf("GET of a row past its retention = %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(gone.Message, "expired under retention class read_only") {
		t.Fatalf("GET swept row: %q", gone.Message)
	}
	// The Provider's pipeline sending the receipt again (after a crash)
	// is answered 410 ROW_EXPIRED: the ledger had it, and the entry is
	// delivered, not set aside as refused.
	c := &pipeline.LedgerClient{URL: e.base, Key: keys["writer"]}
	var actions []pipeline.Action
	for _, a := range r.Actions {
		actions = append(actions, pipeline.Action{Tool: a.Tool, Target: a.Target, ArgsJSON: a.ArgsJSON})
	}
	item := pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: actions}}
	if err := c.Post(context.Background(), item); err != nil {
		t.Fatalf("sending the swept receipt again: %v", err)
	}
	// The writer learns the row was recorded and swept, not when it went
	// (a hold or an incident's closing sets that).
	var again struct {
		Message string
		Details []struct {
			Reason   string
			Metadata map[string]string
		}
	}
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(r), &again); code != 410 || len(again.Details) != 1 || again.Details[0].Reason != "ROW_EXPIRED" ||
		again.Details[0].Metadata["retainUntil"] != "" || again.Details[0].Metadata["sweptAt"] != "" || again.Details[0].Metadata["retentionClass"] == "" ||
		strings.Contains(again.Message, " on ") {
		t.Fatalf("the writer posting the swept receipt again: %d %+v; want 410 ROW_EXPIRED with its class, without its dates", code, again)
	}
	var dry struct{ DryRun bool }
	if code := e.call(t, "POST", "/v1/retention:sweep", "auditor", map[string]any{"dryRun": true}, &dry); code != 200 || !dry.DryRun {
		t.Fatalf("dry run = %d %+v", code, dry)
	}
	if code := e.call(t, "POST", "/v1/retention:sweep", "auditor", map[string]any{}, nil); code != 403 {
		t.Fatalf("auditor sweeping = %d", code)
	}
	if code := e.call(t, "POST", "/v1/retention:sweep", "admin", map[string]any{}, nil); code != 200 {
		t.Fatalf("sweep = %d", code)
	}
	if code := e.call(t, "GET", "/v1/rows/"+strings.Repeat("0", 64), "support", nil, nil); code != 404 {
		t.Fatalf("unknown row = %d", code)
	}
}

// A dry run as of a later time lists what a sweep then would remove: a
// money-moved row recorded now, at nineteen months. It removes nothing,
// and a sweep that would remove at another time than now is refused.
func TestSweepPreviewAtALaterTime(t *testing.T) {
	e := newEnv(t, jose.ES256)
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "P-1"})), &rep)
	e.waitDrained(t) // its evidence in write-once storage: nothing else keeps it
	type swept struct{ RowID string }
	var preview struct {
		At     time.Time
		DryRun bool
		Swept  []swept
	}
	for _, tc := range []struct {
		at   time.Time
		want int
	}{{time.Now().AddDate(0, 1, 0), 0}, {time.Now().AddDate(0, 19, 0), 1}} {
		preview.Swept = nil
		if code := e.call(t, "POST", "/v1/retention:sweep", "auditor", map[string]any{"dryRun": true, "at": tc.at.UTC().Format(time.RFC3339)}, &preview); code != 200 {
			t.Fatalf("a dry run at %v: %d", tc.at, code)
		}
		if len(preview.Swept) != tc.want || (tc.want == 1 && preview.Swept[0].RowID != rep.Row.ID) || !preview.DryRun || !preview.At.Equal(tc.at.UTC().Truncate(time.Second)) {
			t.Fatalf("a dry run at %v lists %+v (at %v), want %d rows", tc.at, preview.Swept, preview.At, tc.want)
		}
	}
	if code := e.call(t, "GET", "/v1/rows/"+rep.Row.ID, "support", nil, nil); code != 200 {
		t.Fatalf("the row after the previews: %d", code)
	}
	if code := e.call(t, "POST", "/v1/retention:sweep", "admin", map[string]any{"at": time.Now().AddDate(2, 0, 0).UTC().Format(time.RFC3339)}, nil); code != 400 {
		t.Fatalf("a sweep (not a dry run) at a later time: %d, want 400", code)
	}
}
