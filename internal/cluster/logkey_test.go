package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// TestReplicaWithAnotherLogKeyIsRefused: once the database holds the
// log's checkpoints, a replica started without the shared
// merkleLog.keyFile makes no key of its own and does not start, and one
// given another key does not start either; each says to use the key
// file the other replicas use. The running replica's log goes on under
// the published key.
func TestReplicaWithAnotherLogKeyIsRefused(t *testing.T) {
	pgtest.Available(t)
	e := newEnv(t, pgtest.CreateDB(t), 1500*time.Millisecond, 2*time.Second)
	r1 := e.startInProcess("r1")
	if _, err := r1.client.AppendReceipt(as(t.Context(), writerKey), e.corpus(1, "logkey")[0]); err != nil {
		t.Fatal(err)
	}
	poll(t, "a checkpoint in the database", 30*time.Second, func() bool { return e.checkpoint(t, r1).Size > 0 })

	noKey := e.config("r3")
	noKey.MerkleLog.KeyFile = "" // <dataDir>/log/signing.key, not there
	other := e.config("r4")
	other.MerkleLog.KeyFile = filepath.Join(e.dir, "other", "signing.key")
	if _, _, _, err := config.EnsureLogKey(&other); err != nil {
		t.Fatal(err)
	}
	for _, c := range []config.Config{noKey, other} {
		srv, err := server.New(t.Context(), c, slog.New(slog.DiscardHandler))
		if err == nil {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_ = srv.Serve(ctx)
			t.Fatalf("%s, with the log key %s, started on a database whose log another key signs", c.Leases.Holder, c.LogKeyFile())
		}
		t.Logf("%s refused: %v", c.Leases.Holder, err)
		if !strings.Contains(err.Error(), "merkleLog.keyFile") || !strings.Contains(err.Error(), "the other replicas use") {
			t.Errorf("%s refused with %q; want it to say to use the merkleLog.keyFile the other replicas use", c.Leases.Holder, err)
		}
	}
	if _, err := os.Stat(noKey.LogKeyFile()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a replica refused for want of the log's key made one at %s (%v)", noKey.LogKeyFile(), err)
	}
	if _, err := r1.client.AppendReceipt(as(t.Context(), writerKey), e.corpus(2, "logkey")[1]); err != nil {
		t.Fatal(err)
	}
	poll(t, "the log grows under the published key", 30*time.Second, func() bool { return e.checkpoint(t, r1).Size > 1 })
}

// TestReplicaWithAnotherLogKeyReleasesTheIntegrator: a replica whose log
// key turns out, after it started, not to be the one that signed the
// database's checkpoints (it started on an empty log, and another replica
// signed first) gives up the integrator's lease when it takes it, and
// takes it no more: the replica with the right key takes it over and the
// log goes on, the rows the wrong-key replica records among it, while the
// wrong-key replica reports not ready, saying why.
func TestReplicaWithAnotherLogKeyReleasesTheIntegrator(t *testing.T) {
	pgtest.Available(t)
	e := newEnv(t, pgtest.CreateDB(t), 900*time.Millisecond, 2*time.Second)
	// The wrong-key replica is made while the log is empty, so the check
	// at start passes.
	wc := e.config("wrong")
	wc.MerkleLog.KeyFile = filepath.Join(e.dir, "other", "signing.key")
	if _, _, _, err := config.EnsureLogKey(&wc); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(e.dir, "wrong.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	wctx, stopW := context.WithCancel(context.Background())
	srvW, err := server.New(wctx, wc, slog.New(slog.NewJSONHandler(logf, nil)))
	if err != nil {
		stopW()
		t.Fatal(err)
	}
	// The right key signs first.
	corpus := e.corpus(2, "wrongkey")
	r1 := e.startInProcess("r1")
	if _, err := r1.client.AppendReceipt(as(t.Context(), writerKey), corpus[0]); err != nil {
		t.Fatal(err)
	}
	poll(t, "a checkpoint signed with the right key", 30*time.Second, func() bool { return e.checkpoint(t, r1).Size > 0 })
	r1.stop() // releases the integrator's lease

	doneW := make(chan error, 1)
	go func() { doneW <- srvW.Serve(wctx) }()
	defer func() {
		stopW()
		if err := <-doneW; err != nil {
			t.Errorf("wrong: %v", err)
		}
	}()
	w := &replica{name: "wrong", httpAddr: srvW.HTTPAddr(), log: logf.Name()}
	e.dial(w, srvW.GRPCAddr())
	pollOr(t, "the wrong-key replica reporting not ready for its log key", 30*time.Second, func() bool {
		code, body := readyzBody(w)
		log, _ := body["log"].(map[string]any)
		msg, _ := log["error"].(string)
		return code == http.StatusServiceUnavailable && log["status"] == "wrong key" &&
			strings.HasPrefix(msg, "this ledger's log key did not sign the row store's checkpoints: ")
	}, func() string { _, body := readyzBody(w); return fmt.Sprintf("readyz %v\n%s", body, w.logTail()) })

	// It still records rows; a replica with the right key integrates them.
	r2 := e.startInProcess("r2")
	rep, err := w.client.AppendReceipt(as(t.Context(), writerKey), corpus[1])
	if err != nil {
		t.Fatal(err)
	}
	id := rep.GetRow().GetId()
	pollOr(t, "the right-key replica integrating the wrong-key replica's row", 30*time.Second, func() bool {
		_, err := r2.client.GetRowProof(as(t.Context(), auditorKey), &ledgerv1.GetRowProofRequest{Id: id})
		return err == nil
	}, func() string { return fmt.Sprintf("leases %v\n%s\n%s", holders(t, e.dsn), w.logTail(), r2.logTail()) })
	if l := holders(t, e.dsn)["log-integrator"]; !l.of("r2") {
		t.Errorf("the integrator's lease is held by %q, want r2", l.holder)
	}
	if code, _ := readyzBody(w); code != http.StatusServiceUnavailable {
		t.Errorf("the wrong-key replica's /readyz = %d after the takeover, want 503 until it is restarted", code)
	}
	if m := metricsText(t, w); !strings.Contains(m, "\npactledger_log_wrong_key 1\n") {
		t.Errorf("the wrong-key replica's /metrics lack pactledger_log_wrong_key 1")
	}
	if m := metricsText(t, r2); !strings.Contains(m, "\npactledger_log_wrong_key 0\n") {
		t.Errorf("the right-key replica's /metrics lack pactledger_log_wrong_key 0")
	}
	if code, _ := readyzBody(r2); code != http.StatusOK {
		t.Errorf("the right-key replica's /readyz = %d, want 200", code)
	}
}

// readyzBody returns a replica's /readyz status and decoded reply.
func readyzBody(r *replica) (int, map[string]any) {
	resp, err := http.Get("http://" + r.httpAddr + "/readyz")
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// metricsText returns a replica's /metrics.
func metricsText(t *testing.T, r *replica) string {
	t.Helper()
	resp, err := http.Get("http://" + r.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
