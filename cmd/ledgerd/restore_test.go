package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger/proof"
)

// restoreEnv is a ledgerd configuration with the Merkle log on and the
// evidence directory outside the data directory, as docs/operations.md
// ("Backups") asks, so that a restore of the data directory leaves the
// published log as it was.
type restoreEnv struct {
	sc                    *pacttest.Scenario
	cfg                   config.Config
	dir                   string
	writerKey, auditorKey string
}

func newRestoreEnv(t *testing.T) *restoreEnv {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	e := &restoreEnv{sc: sc, dir: t.TempDir(), writerKey: "restore-writer-key", auditorKey: "restore-auditor-key"}
	off := false
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.DataDir = filepath.Join(e.dir, "data")
	cfg.Evidence.Dir = filepath.Join(e.dir, "evidence")
	cfg.Audience = sc.Audience
	cfg.AllowInsecureLoopbackJWKS = true
	cfg.Provider.Enabled = &off
	cfg.MerkleLog.Interval = config.Duration(50 * time.Millisecond)
	cfg.APIKeys = []config.APIKey{
		{Name: "writer", SHA256: config.HashKey(e.writerKey), Roles: []string{config.RoleWriter}},
		{Name: "auditor", SHA256: config.HashKey(e.auditorKey), Roles: []string{config.RoleAuditor}},
	}
	for _, b := range sc.Brands() {
		cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range sc.Agents() {
		cfg.Agents = append(cfg.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	e.cfg = cfg
	return e
}

// write records n receipts and returns their row ids.
func (e *restoreEnv) write(t *testing.T, base, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		var rep struct{ Row struct{ ID string } }
		r := e.sc.Mint(pacttest.Spec{Target: prefix + "-" + string(rune('a'+i)), GrantID: "grant-" + prefix})
		if code := call(t, "POST", base+"/v1/receipts", e.writerKey, post(r), &rep); code != http.StatusOK {
			t.Fatalf("POST /v1/receipts = %d", code)
		}
		ids = append(ids, rep.Row.ID)
	}
	return ids
}

type servedCheckpoint struct {
	Checkpoint string `json:"checkpoint"`
	Size       string `json:"size"`
}

// checkpoint returns the checkpoint the ledger serves, parsed.
func checkpointServed(t *testing.T, base string) (servedCheckpoint, proof.Checkpoint) {
	t.Helper()
	var cp servedCheckpoint
	if code := call(t, "GET", base+"/v1/log/checkpoint.json", "", nil, &cp); code != http.StatusOK {
		t.Fatalf("GET /v1/log/checkpoint.json = %d", code)
	}
	parsed, err := proof.ParseCheckpoint(cp.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	return cp, parsed
}

// logSize reads the row store's log size from /metrics
// (pactledger_log_size), which counts leaves integrated, published or not.
func logSize(t *testing.T, base string) int64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(fetch(t, base+"/metrics")))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "pactledger_log_size "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int64(f)
		}
	}
	return 0
}

func copyFileTo(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyOpenBolt copies a bbolt file a ledgerd has open, until the copy
// opens and checks clean (a copy torn by a concurrent commit is taken
// again).
func copyOpenBolt(t *testing.T, from, to string) {
	t.Helper()
	for range 20 {
		copyFileTo(t, from, to)
		db, err := bbolt.Open(to, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		if err == nil {
			err = db.View(func(tx *bbolt.Tx) error {
				for e := range tx.Check() {
					return e
				}
				return nil
			})
			db.Close()
		}
		if err == nil {
			return
		}
	}
	t.Fatal("no clean copy of the bbolt file")
}

// During an outage of the evidence store the ledger goes on integrating
// rows into its row store, but serves only the checkpoint write-once
// storage holds: a checkpoint it signed and had not published would be
// one a restore of the row store from a backup taken before it forgets,
// after which the same key signs another tree at that size (a split view
// with nothing said). So the checkpoint a customer keeps during the
// outage is the published one, and every checkpoint the ledger serves
// after the row store is restored from a backup taken during the outage
// extends it.
func TestARestoreAfterAnOutageServesNoOtherHistory(t *testing.T) {
	e := newRestoreEnv(t)
	cfgPath := writeConfig(t, e.dir, "ledgerd.yaml", e.cfg)
	dbPath := filepath.Join(e.cfg.DataDir, "ledger.db")
	evidence := e.cfg.Evidence.Dir

	base, _, stop := runLedgerd(t, cfgPath)
	for _, id := range e.write(t, base, "before", 3) {
		waitProof(t, base, id, e.auditorKey)
	}
	// The served checkpoint is the one write-once storage holds.
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		cp, _ := checkpointServed(t, base)
		b, _ := os.ReadFile(filepath.Join(evidence, "log", "checkpoint"))
		if string(b) == cp.Checkpoint {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %q never published (the evidence directory holds %q)", cp.Checkpoint, b)
		}
		<-poll.C
	}

	// The evidence store goes away: the directory is replaced by a file,
	// so every put fails.
	if err := os.Rename(evidence, evidence+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(evidence, []byte("outage"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A backup of the row store taken now: it holds all the bucket holds.
	copyOpenBolt(t, dbPath, filepath.Join(e.dir, "backup.db"))
	_, before := checkpointServed(t, base)
	lost := e.write(t, base, "outage", 4)
	// Wait until the row store's log holds them (integrated, signed in
	// the row store, not published).
	deadline = time.Now().Add(30 * time.Second)
	var grown int64
	for grown = logSize(t, base); grown < before.Size+int64(len(lost)); grown = logSize(t, base) {
		if time.Now().After(deadline) {
			t.Fatalf("the row store's log did not grow during the outage: %d leaves, want %d", grown, before.Size+int64(len(lost)))
		}
		<-poll.C
	}
	// A customer keeps the checkpoint served now.
	kept, keptCP := checkpointServed(t, base)
	published, err := os.ReadFile(filepath.Join(evidence+".away", "log", "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	if kept.Checkpoint != string(published) {
		t.Errorf("during the outage the ledger serves a checkpoint of size %d that write-once storage does not hold (it holds %q)", keptCP.Size, published)
	}
	for _, id := range lost {
		var raw json.RawMessage
		if code := call(t, "GET", base+"/v1/rows/"+id+"/proof", e.auditorKey, nil, &raw); code == http.StatusOK {
			t.Errorf("row %s has a proof during the outage, under a checkpoint write-once storage does not hold", id)
		}
	}
	stop()
	t.Logf("the customer keeps the served checkpoint of size %d; the row store's log reached %d", keptCP.Size, grown)

	// The operator restores the row store from the backup; the bucket is back.
	if err := os.Remove(evidence); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(evidence+".away", evidence); err != nil {
		t.Fatal(err)
	}
	copyFileTo(t, filepath.Join(e.dir, "backup.db"), dbPath)
	base, logs, stop := runLedgerd(t, cfgPath)
	defer stop()

	// The ledger goes on; write until its served log is past the size its
	// row store reached during the outage.
	var cur proof.Checkpoint
	deadline = time.Now().Add(60 * time.Second)
	for i := 0; cur.Size <= grown; i++ {
		ids := e.write(t, base, "new"+strconv.Itoa(i), 1)
		waitProof(t, base, ids[0], e.auditorKey)
		_, cur = checkpointServed(t, base)
		if time.Now().After(deadline) {
			t.Fatalf("the log did not grow past %d: %d", grown, cur.Size)
		}
	}
	for size := keptCP.Size; size <= cur.Size; size++ {
		var cons struct {
			Proof          [][]byte `json:"proof"`
			FromCheckpoint string   `json:"fromCheckpoint"`
			ToCheckpoint   string   `json:"toCheckpoint"`
		}
		url := base + "/v1/log/consistency?from=" + strconv.FormatInt(keptCP.Size, 10) + "&to=" + strconv.FormatInt(size, 10)
		code := call(t, "GET", url, "", nil, &cons)
		if code == http.StatusNotFound {
			continue // no checkpoint signed at that size
		}
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d", url, code)
		}
		if size == keptCP.Size && cons.FromCheckpoint != kept.Checkpoint {
			t.Errorf("the ledger's checkpoint at the kept size %d is %q, not the one kept %q", size, cons.FromCheckpoint, kept.Checkpoint)
		}
		to, err := proof.ParseCheckpoint(cons.ToCheckpoint)
		if err != nil {
			t.Fatal(err)
		}
		var p tlog.TreeProof
		for _, h := range cons.Proof {
			var x tlog.Hash
			copy(x[:], h)
			p = append(p, x)
		}
		if err := tlog.CheckTree(p, to.Size, to.Hash, keptCP.Size, keptCP.Hash); err != nil {
			t.Errorf("SPLIT VIEW: the log key signed %d/%x, served before the restore, and now %d/%x, which does not extend it: %v",
				keptCP.Size, keptCP.Hash[:6], to.Size, to.Hash[:6], err)
		}
	}
	if t.Failed() {
		t.Logf("ledgerd log:\n%s", logs)
	}
}
