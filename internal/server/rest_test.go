package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
)

func TestRESTEveryCheck(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.ES256, jose.RS256} {
		t.Run(string(alg), func(t *testing.T) {
			e := newEnv(t, alg)
			sc := e.sc
			tests := []struct {
				name       string
				spec       pacttest.Spec
				edit       func(r *pacttest.Receipt)
				wantStatus string
				wantFail   []string
			}{
				{name: "authorized", wantStatus: "ROW_STATUS_AUTHORIZED"},
				{name: "receipt signature", edit: func(r *pacttest.Receipt) { r.ReceiptJWS = pacttest.MustKey("brand-k3", alg).Sign(r.Claims) }, wantStatus: "ROW_STATUS_UNAUTHORIZED", wantFail: []string{"receipt_signature"}},
				{name: "receipt alg none", edit: func(r *pacttest.Receipt) {
					p := strings.Split(r.ReceiptJWS, ".")
					r.ReceiptJWS = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + p[1] + "."
				}, wantStatus: "ROW_STATUS_UNAUTHORIZED", wantFail: []string{"receipt_signature"}},
				{name: "request signature", edit: func(r *pacttest.Receipt) { r.RequestJWT = pacttest.MustKey("pa-2026-09", alg).Sign(r.RequestClaims) }, wantStatus: "ROW_STATUS_UNAUTHORIZED", wantFail: []string{"request_signature"}},
				{name: "delegation token expired", edit: func(r *pacttest.Receipt) {
					r.TokenClaims["exp"] = r.TokenClaims["iat"].(int64) + 30
					sc.Resign(r)
				}, wantStatus: "ROW_STATUS_UNAUTHORIZED", wantFail: []string{"delegation_token"}},
				{name: "bindings", edit: func(r *pacttest.Receipt) { r.TokenClaims["sub"] = "acct-other"; sc.Resign(r) }, wantStatus: "ROW_STATUS_UNAUTHORIZED", wantFail: []string{"bindings"}},
				{name: "scopes beyond grant", spec: pacttest.Spec{ScopesUsed: []string{"plan:change"}}, wantStatus: "ROW_STATUS_INCIDENT", wantFail: []string{"scopes_within_grant"}},
				{name: "args hash", edit: func(r *pacttest.Receipt) { r.Actions[0].ArgsJSON = `{"order":"A-0000"}` }, wantStatus: "ROW_STATUS_INCIDENT", wantFail: []string{"args_hash"}},
			}
			for i, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.spec.Target = fmt.Sprintf("A-%d", i)
					r := sc.Mint(tc.spec)
					if tc.edit != nil {
						tc.edit(r)
					}
					var rep appendReply
					if code := e.call(t, "POST", "/v1/receipts", "writer", post(r), &rep); code != http.StatusOK {
						t.Fatalf("POST /v1/receipts = %d", code)
					}
					row := rep.Row
					if rep.Outcome != "APPEND_OUTCOME_CREATED" || row.Status != tc.wantStatus {
						t.Fatalf("outcome %s status %s, want %s; checks %+v", rep.Outcome, row.Status, tc.wantStatus, row.Verifier.Checks)
					}
					for _, name := range []string{"receipt_signature", "request_signature", "delegation_token", "bindings", "scopes_within_grant", "args_hash", "within_limits", "duplicate", "grant_not_revoked"} {
						c := row.check(name)
						want := "CHECK_RESULT_PASS"
						if name == "within_limits" {
							want = "CHECK_RESULT_SKIPPED"
						}
						if slices.Contains(tc.wantFail, name) {
							want = "CHECK_RESULT_FAIL"
						}
						if c.Result != want {
							t.Errorf("%s = %s (%s), want %s", name, c.Result, c.Detail, want)
						}
						if c.Result != "CHECK_RESULT_PASS" && c.Detail == "" {
							t.Errorf("%s %s without a detail", name, c.Result)
						}
					}
					if tc.wantStatus == "ROW_STATUS_INCIDENT" && !strings.HasPrefix(row.IncidentID, "INC-") {
						t.Errorf("incident row without incident id")
					}
				})
			}
		})
	}
}

func TestRESTWriteReadVerify(t *testing.T) {
	e := newEnv(t, jose.ES256)
	r := e.sc.Mint(pacttest.Spec{})
	var rep appendReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(r), &rep); code != 200 {
		t.Fatalf("append = %d", code)
	}
	row := rep.Row
	if len(row.ID) != 64 || row.ReceiptID != "sha256:"+row.ID || row.Kind != "ROW_KIND_RECEIPT" || row.Principal != "acct-48213" ||
		row.GrantID != "a2agrant_7Q2F" || row.Agent.Platform != e.sc.PA.ID || row.Agent.RequestJwtKid != "pa-2026-09" || row.BrandKey.Kid != "brand-k3" ||
		row.RetentionClass != "RETENTION_CLASS_MONEY_MOVED" || !retainedFromNow(row.RetainUntil, 18) || row.DisputeStatus != "DISPUTE_STATUS_NONE" ||
		row.IssuedAt != "2026-10-07T13:12:44Z" || !slices.Equal(row.ScopeGranted, []string{"orders:read", "orders:cancel"}) ||
		len(row.Actions) != 1 || row.Actions[0].ArgsHashSource != "ARGS_HASH_SOURCE_RECEIPT" || row.Actions[0].Target != "A-5531" {
		t.Fatalf("row: %+v", row)
	}
	// Idempotent resubmission.
	var again appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(r), &again)
	if again.Outcome != "APPEND_OUTCOME_ALREADY_RECORDED" || again.Row.ID != row.ID {
		t.Fatalf("resubmission: %s", again.Outcome)
	}

	var got struct{ Row Row }
	if code := e.call(t, "GET", "/v1/rows/"+row.ID, "support", nil, &got); code != 200 || got.Row.ID != row.ID {
		t.Fatalf("GET row = %d", code)
	}
	for _, q := range []string{"target=A-5531", "principal=acct-48213", "grantId=a2agrant_7Q2F", "agent=" + e.sc.PA.ID, "status=ROW_STATUS_AUTHORIZED", "retentionClass=RETENTION_CLASS_MONEY_MOVED",
		"since=2026-10-07T13:00:00Z&until=2026-10-07T14:00:00Z", "target=A-5531&principal=acct-48213&pageSize=1"} {
		var list struct {
			Rows          []Row  `json:"rows"`
			NextPageToken string `json:"nextPageToken"`
		}
		if code := e.call(t, "GET", "/v1/rows?"+q, "auditor", nil, &list); code != 200 || len(list.Rows) != 1 || list.Rows[0].ID != row.ID {
			t.Fatalf("list %s = %d %+v", q, code, list)
		}
	}
	var none struct{ Rows []Row }
	e.call(t, "GET", "/v1/rows?target=A-0000", "auditor", nil, &none)
	if len(none.Rows) != 0 {
		t.Fatalf("list for another target returned rows")
	}

	var ev struct {
		RowID, ReceiptJws, RequestJwt, DelegationToken, EvidenceSha256 string
		JwksSnapshots                                                  []string
		Actions                                                        []struct{ Tool, Target, ArgsJson string }
		Objects                                                        []struct {
			Name, Store, Bucket, Key, RetainUntil string
			Uploaded                              bool
		}
	}
	if code := e.call(t, "GET", "/v1/rows/"+row.ID+"/evidence", "auditor", nil, &ev); code != 200 {
		t.Fatalf("evidence = %d", code)
	}
	if ev.ReceiptJws != r.ReceiptJWS || ev.RequestJwt != r.RequestJWT || ev.DelegationToken != r.DelegationToken || len(ev.JwksSnapshots) != 2 ||
		len(ev.Actions) != 1 || ev.Actions[0].ArgsJson != r.Actions[0].ArgsJSON || len(ev.Objects) != 3 {
		t.Fatalf("evidence: %+v", ev)
	}
	var snap struct {
		ID, SourceURI, FetchedAt string
		Jwks                     []byte
	}
	if code := e.call(t, "GET", "/v1/jwks-snapshots/"+row.BrandKey.JwksSnapshot, "auditor", nil, &snap); code != 200 {
		t.Fatalf("snapshot = %d", code)
	}
	live, _ := http.Get(e.sc.Brand.JWKS.URL())
	liveBody, _ := io.ReadAll(live.Body)
	live.Body.Close()
	if !bytes.Equal(snap.Jwks, liveBody) {
		t.Fatalf("snapshot bytes differ from the JWKS served")
	}

	var v struct {
		Same            bool
		Checks          []Check
		WriteTimeChecks []Check
	}
	if code := e.call(t, "POST", "/v1/rows/"+row.ID+":verify", "auditor", map[string]any{}, &v); code != 200 || !v.Same || len(v.Checks) != 9 || len(v.WriteTimeChecks) != 9 {
		t.Fatalf("verify = %d %+v", code, v)
	}

	var d struct{ Row Row }
	if code := e.call(t, "POST", "/v1/rows/"+row.ID+"/disputes", "support", map[string]any{"status": "DISPUTE_STATUS_OPEN", "note": "I never approved that"}, &d); code != 200 {
		t.Fatalf("dispute = %d", code)
	}
	if d.Row.DisputeStatus != "DISPUTE_STATUS_OPEN" || len(d.Row.DisputeEvents) != 1 || d.Row.DisputeEvents[0].By != "support-key" {
		t.Fatalf("dispute row: %+v", d.Row.DisputeEvents)
	}

	var ref struct{ Row Row }
	code := e.call(t, "POST", "/v1/refusals", "writer", map[string]any{"claimedPrincipal": "acct 30418", "claimedAgent": "assistant from MyHelper",
		"action": map[string]string{"tool": "change_address", "target": "acct-30418"}, "reason": "no receipt; routed to human", "observedAt": "2026-10-06T17:20:10Z"}, &ref)
	if code != 200 || ref.Row.Kind != "ROW_KIND_REFUSAL" || ref.Row.Status != "ROW_STATUS_UNAUTHORIZED" || ref.Row.RetentionClass != "RETENTION_CLASS_REFUSED" {
		t.Fatalf("refusal = %d %+v", code, ref.Row)
	}
}

func TestRESTKeyRotationVerifyFromSnapshots(t *testing.T) {
	e := newEnv(t, jose.RS256)
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{})), &rep)
	if rep.Row.Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("status %s", rep.Row.Status)
	}
	// Both signers rotate: the old keys are gone from the live JWKS.
	nb, np := pacttest.MustKey("brand-k4", jose.RS256), pacttest.MustKey("pa-2026-12", jose.RS256)
	e.sc.Brand.JWKS.Set(nb)
	e.sc.PA.JWKS.Set(np)
	var v struct {
		Same   bool
		Checks []Check
	}
	e.call(t, "POST", "/v1/rows/"+rep.Row.ID+":verify", "support", map[string]any{}, &v)
	if !v.Same {
		t.Fatalf("after rotation: %+v", v)
	}
	for _, c := range v.Checks {
		if c.Name == "receipt_signature" && c.Result != "CHECK_RESULT_PASS" {
			t.Fatalf("receipt_signature after rotation: %+v", c)
		}
	}
	// New receipts under the new keys verify live (refetch on unknown kid).
	e.sc.Brand.Key, e.sc.PA.Key = nb, np
	var rep2 appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "A-2"})), &rep2)
	if rep2.Row.Status != "ROW_STATUS_AUTHORIZED" || rep2.Row.BrandKey.JwksSnapshot == rep.Row.BrandKey.JwksSnapshot {
		t.Fatalf("after rotation new receipt: %s, snapshot %s", rep2.Row.Status, rep2.Row.BrandKey.JwksSnapshot)
	}
}

func TestRoles(t *testing.T) {
	e := newEnv(t, jose.ES256)
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{})), &rep)
	id := rep.Row.ID
	snap := rep.Row.BrandKey.JwksSnapshot
	calls := []struct {
		name, method, path string
		body               any
		allowed            []string
	}{
		{"AppendReceipt", "POST", "/v1/receipts", post(e.sc.Mint(pacttest.Spec{})), []string{"writer"}},
		{"AppendReceipts", "POST", "/v1/receipts:batch", map[string]any{"receipts": []any{post(e.sc.Mint(pacttest.Spec{}))}}, []string{"writer"}},
		{"AppendRefusal", "POST", "/v1/refusals", map[string]any{"action": map[string]string{"tool": "x"}, "reason": "r", "observedAt": "2026-10-06T17:20:10Z"}, []string{"writer"}},
		{"GetRow", "GET", "/v1/rows/" + id, nil, []string{"support", "auditor", "admin"}},
		{"ListRows", "GET", "/v1/rows", nil, []string{"support", "auditor", "admin"}},
		{"GetEvidence", "GET", "/v1/rows/" + id + "/evidence", nil, []string{"support", "auditor", "admin"}},
		{"GetJwksSnapshot", "GET", "/v1/jwks-snapshots/" + snap, nil, []string{"support", "auditor", "admin"}},
		{"VerifyRow", "POST", "/v1/rows/" + id + ":verify", map[string]any{}, []string{"support", "auditor", "admin"}},
		{"AppendDisputeEvent", "POST", "/v1/rows/" + id + "/disputes", map[string]any{"status": "DISPUTE_STATUS_OPEN"}, []string{"support", "admin"}},
		{"RunDrill", "POST", "/v1/drills", map[string]any{"target": "A-5531"}, []string{"support", "admin"}},
		{"ListDrills", "GET", "/v1/drills", nil, []string{"support", "auditor", "admin"}},
		{"GetGrant", "GET", "/v1/grants/a2agrant_7Q2F", nil, []string{"support", "auditor", "admin"}},
		{"CheckIntegrity", "POST", "/v1/integrity:check", map[string]any{}, []string{"auditor", "admin"}},
		{"RestoreEvidence", "POST", "/v1/rows/" + id + ":restore", map[string]any{}, []string{"admin"}},
		{"RevokeGrant", "POST", "/v1/grants/a2agrant_other:revoke", map[string]any{"revokedAt": "2026-10-08T00:00:00Z"}, []string{"writer", "admin"}},
		{"ListIncidents", "GET", "/v1/incidents", nil, []string{"support", "auditor", "admin"}},
		{"Sweep dry run", "POST", "/v1/retention:sweep", map[string]any{"dryRun": true}, []string{"auditor", "admin"}},
		{"Sweep", "POST", "/v1/retention:sweep", map[string]any{}, []string{"admin"}},
	}
	for _, c := range calls {
		for _, role := range []string{"", "not-a-key", "writer", "support", "auditor", "admin"} {
			code := e.call(t, c.method, c.path, role, c.body, nil)
			want := http.StatusForbidden
			switch {
			case role == "" || role == "not-a-key":
				want = http.StatusUnauthorized
			case slices.Contains(c.allowed, role):
				want = http.StatusOK
			}
			if code != want {
				t.Errorf("%s as %q = %d, want %d", c.name, role, code, want)
			}
		}
	}
}

func TestRESTBadInput(t *testing.T) {
	e := newEnv(t, jose.ES256)
	big := `{"receiptJws":"` + strings.Repeat("a", 2<<20) + `"}`
	tests := []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"malformed JSON", "POST", "/v1/receipts", `{"receiptJws":`, 400},
		// A refusal that would be recorded, with more after its JSON.
		{"JSON and more after it", "POST", "/v1/refusals", `{"action":{"tool":"x"},"reason":"r","observedAt":"` + time.Now().UTC().Format(time.RFC3339) + `"} {}`, 400},
		{"empty body", "POST", "/v1/receipts", ` `, 400},
		{"not JSON", "POST", "/v1/receipts", `<xml/>`, 400},
		{"unknown field", "POST", "/v1/receipts", `{"receiptJws":"a.b.c","extra":1}`, 400},
		{"missing receiptJws", "POST", "/v1/receipts", `{}`, 400},
		{"non-JWS", "POST", "/v1/receipts", `{"receiptJws":"hello world"}`, 400},
		{"JWS of non-receipt", "POST", "/v1/receipts", `{"receiptJws":"eyJhbGciOiJFUzI1NiJ9.WzFd.c2ln"}`, 400},
		{"oversized body", "POST", "/v1/receipts", big, 413},
		{"oversized token", "POST", "/v1/receipts", `{"receiptJws":"` + strings.Repeat("a", 20<<10) + `"}`, 400},
		{"bad row id", "GET", "/v1/rows/abc", nil, 400},
		{"verify via GET", "GET", "/v1/rows/abc:verify", nil, 400},
		{"unknown row", "GET", "/v1/rows/" + strings.Repeat("0", 64), nil, 404},
		{"unknown snapshot", "GET", "/v1/jwks-snapshots/" + strings.Repeat("0", 64), nil, 404},
		{"page size", "GET", "/v1/rows?pageSize=5000", nil, 400},
		{"bad time", "GET", "/v1/rows?since=yesterday", nil, 400},
		{"until year 1, which would read as no bound", "GET", "/v1/rows?until=0001-01-01T00:00:00Z", nil, 400},
		{"since before 1970", "GET", "/v1/rows?since=1960-01-01T00:00:00Z", nil, 400},
		{"refusal without time", "POST", "/v1/refusals", `{"action":{"tool":"x"},"reason":"r"}`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			role := "admin"
			if tc.method == "POST" {
				role = "writer"
			}
			var errBody struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			code := e.call(t, tc.method, tc.path, role, tc.body, &errBody)
			if code != tc.want {
				t.Fatalf("= %d (%s), want %d", code, errBody.Message, tc.want)
			}
			if errBody.Message == "" {
				t.Fatalf("no error message")
			}
		})
	}
	var list struct{ Rows []Row }
	e.call(t, "GET", "/v1/rows", "admin", nil, &list)
	if len(list.Rows) != 0 {
		t.Fatalf("bad input stored %d rows", len(list.Rows))
	}
}

func TestHealthMetricsOpenAPI(t *testing.T) {
	e := newEnv(t, jose.ES256)
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{})), nil)
	var unknown appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Tool: "teleport", Target: "T-1"})), &unknown)
	if unknown.Row.RetentionClass != "RETENTION_CLASS_MONEY_MOVED" {
		t.Fatalf("unknown tool class %s", unknown.Row.RetentionClass)
	}
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json"} {
		if code := e.call(t, "GET", p, "", nil, nil); code != 200 {
			t.Errorf("%s = %d", p, code)
		}
	}
	var ready struct {
		Status      string
		OutboxDepth *int
	}
	e.call(t, "GET", "/readyz", "", nil, &ready)
	if ready.Status != "ready" || ready.OutboxDepth == nil {
		t.Fatalf("readyz: %+v", ready)
	}
	resp, err := http.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`pactledger_writes_total{outcome="created",status="authorized"} 2`, "pactledger_unclassified_tool_rows_total 1", "pactledger_outbox_depth", "pactledger_verify_seconds", "pactledger_commit_batch_rows", "pactledger_commit_seconds", "pactledger_jwks_fetches_total", "pactledger_jwks_stale_seconds", "pactledger_jwks_stale_served_total", "pactledger_log_size", "pactledger_outbox_dead_letters", "pactledger_signature_cache_hits_total", "pactledger_signature_cache_misses_total", "pactledger_signature_cache_evictions_total"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	// The writes above were committed, and each commit was timed.
	series := scrape(t, e)
	for _, m := range []string{"pactledger_commit_batch_rows_count", "pactledger_commit_seconds_count"} {
		if n := series[m]; n < 1 {
			t.Errorf("/metrics: %s is %v after two writes, want at least 1", m, n)
		}
	}
	// bbolt wrote and synced those commits' pages, and spilled their nodes.
	// Each commit freed the pages it rewrote. The rows' numbers by id are
	// pending: far fewer than a generation, none merged.
	for _, m := range []string{"pactledger_bbolt_write_seconds_total", "pactledger_bbolt_spill_seconds_total", "pactledger_bbolt_free_pages", "pactledger_bbolt_pending_rows"} {
		if v, ok := series[m]; !ok || v <= 0 {
			t.Errorf("/metrics: %s is %v (present %v) after two writes, want more than 0", m, v, ok)
		}
	}
	for _, m := range []string{"pactledger_bbolt_merges_total", "pactledger_bbolt_merge_failures_total"} {
		if v, ok := series[m]; !ok || v != 0 {
			t.Errorf("/metrics: %s is %v (present %v) after two writes, want 0", m, v, ok)
		}
	}
	var api struct {
		Paths map[string]any `json:"paths"`
	}
	e.call(t, "GET", "/openapi.json", "", nil, &api)
	if _, ok := api.Paths["/v1/receipts"]; !ok {
		t.Fatalf("openapi lacks /v1/receipts")
	}
}

func TestEvidenceInS3WithCompliance(t *testing.T) {
	bucket := s3test.Bucket()
	e := newEnv(t, jose.ES256, withS3(bucket))
	var rep appendReply
	e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{})), &rep)
	id := rep.Row.ID

	var ev struct {
		Objects []struct {
			Name, Store, Bucket, Key, VersionId, RetainUntil string
			Uploaded                                         bool
			Offset, Length                                   int
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		e.call(t, "GET", "/v1/rows/"+id+"/evidence", "auditor", nil, &ev)
		all := len(ev.Objects) == 3
		for _, o := range ev.Objects {
			all = all && o.Uploaded
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("evidence not uploaded: %+v", ev)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, err := minio.New(s3srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3srv.AccessKey, s3srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range ev.Objects {
		if o.Store != "s3" || o.Bucket != bucket || o.VersionId == "" {
			t.Fatalf("object %+v", o)
		}
		info, err := c.StatObject(ctx, bucket, o.Key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Metadata.Get("X-Amz-Object-Lock-Mode") != "COMPLIANCE" {
			t.Fatalf("%s lock mode %q", o.Key, info.Metadata.Get("X-Amz-Object-Lock-Mode"))
		}
		want, _ := time.Parse(time.RFC3339, o.RetainUntil)
		got, _ := time.Parse(time.RFC3339, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
		if !got.Equal(want) {
			t.Fatalf("%s retain until %v, row says %v", o.Key, got, want)
		}
		if err := c.RemoveObject(ctx, bucket, o.Key, minio.RemoveObjectOptions{VersionID: o.VersionId}); err == nil {
			t.Fatalf("deleted %s through S3", o.Key)
		}
		opts := minio.PutObjectOptions{DisableMultipart: true}
		opts.SetMatchETagExcept("*")
		if _, err := c.PutObject(ctx, bucket, o.Key, strings.NewReader("forged"), 6, opts); err == nil {
			t.Fatalf("overwrote %s through S3", o.Key)
		}
	}
	// The row's bytes in its segment object hash to the row's evidence hash.
	seg := ev.Objects[0]
	obj, err := c.GetObject(ctx, bucket, seg.Key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(obj)
	if seg.Length == 0 || seg.Offset+seg.Length > len(b) {
		t.Fatalf("segment %s: %d bytes, row at %d+%d", seg.Key, len(b), seg.Offset, seg.Length)
	}
	if sum := sha256.Sum256(b[seg.Offset : seg.Offset+seg.Length]); hex.EncodeToString(sum[:]) != rep.Row.EvidenceSha256 {
		t.Fatalf("segment bytes of the row do not hash to its evidence hash")
	}
}

// retainedFromNow reports whether an RFC 3339 retain-until lies the given
// months after now (give or take a minute): a receipt posted late is kept
// from when it was recorded.
func retainedFromNow(until string, months int) bool {
	t, err := time.Parse(time.RFC3339, until)
	want := time.Now().AddDate(0, months, 0)
	return err == nil && t.After(want.Add(-time.Minute)) && t.Before(want.Add(time.Minute))
}
