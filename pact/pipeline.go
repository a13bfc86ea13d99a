package pact

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/retry"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

var (
	bPipeline = []byte("pipeline")
	bDead     = []byte("pipeline_rejected")
)

// LedgerPost is one receipt for the ledger's AppendReceipt (POST
// /v1/receipts), as the outbox keeps it.
type LedgerPost struct {
	ReceiptJWS      string        `json:"receiptJws"`
	RequestJWT      string        `json:"requestJwt"`
	DelegationToken string        `json:"delegationToken"`
	Actions         []LedgerEntry `json:"actions"`
	ContextID       string        `json:"contextId,omitempty"`
	MessageID       string        `json:"messageId,omitempty"`
}

// LedgerEntry is one action log entry of a LedgerPost.
type LedgerEntry struct {
	Tool     string `json:"tool"`
	Target   string `json:"target,omitempty"`
	ArgsJSON string `json:"argsJson,omitempty"`
}

// LedgerRefusal is an account action refused, or a consent denied, as the
// ledger's public API takes it (POST /v1/refusals).
type LedgerRefusal struct {
	ClaimedPrincipal string        `json:"claimedPrincipal"`
	ClaimedAgent     string        `json:"claimedAgent"`
	RequestJWT       string        `json:"requestJwt,omitempty"`
	Action           RefusedAction `json:"action"`
	Reason           string        `json:"reason"`
	ObservedAt       time.Time     `json:"observedAt"`
}

// RefusedAction is the action of a LedgerRefusal.
type RefusedAction struct {
	Tool   string `json:"tool"`
	Target string `json:"target,omitempty"`
}

// LedgerRevocation is a grant the User revoked, as the ledger's public API
// takes it (POST /v1/grants/{grantId}:revoke).
type LedgerRevocation struct {
	GrantID   string    `json:"grantId"`
	RevokedAt time.Time `json:"revokedAt"`
	Note      string    `json:"note,omitempty"`
}

// LedgerItem is one entry of the Provider's outbox: exactly one of a
// receipt, a refusal or a revocation.
type LedgerItem struct {
	Receipt    *LedgerPost       `json:"receipt,omitempty"`
	Refusal    *LedgerRefusal    `json:"refusal,omitempty"`
	Revocation *LedgerRevocation `json:"revocation,omitempty"`
}

// Sink receives the Provider's outbox, in order. It returns an error
// wrapping ErrRejected when retrying cannot help (the ledger refused the
// input); any other error is retried.
type Sink interface {
	Post(ctx context.Context, item LedgerItem) error
}

// ErrRejected: the ledger refused a receipt as invalid input.
var ErrRejected = errors.New("rejected by the ledger")

// LedgerClient posts receipts, refusals and revocations to a ledger's REST
// API with a writer key. The bodies are the generated ledgerv1 request
// messages in protojson, as the ledger's gateway reads them, so the
// pipeline follows the ledger's contract rather than a copy of it.
type LedgerClient struct {
	URL  string // such as http://127.0.0.1:8080
	Key  string
	HTTP *http.Client
}

// ledgerRequest is an outbox entry as the ledger API's request: the REST
// path of its RPC and the message.
func ledgerRequest(item LedgerItem) (string, proto.Message, error) {
	switch {
	case item.Receipt != nil:
		r := item.Receipt
		req := &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			ContextId: r.ContextID, MessageId: r.MessageID, Actions: []*ledgerv1.Action{}}
		for _, a := range r.Actions {
			req.Actions = append(req.Actions, &ledgerv1.Action{Tool: a.Tool, Target: a.Target, ArgsJson: a.ArgsJSON})
		}
		return "/v1/receipts", req, nil
	case item.Refusal != nil:
		r := item.Refusal
		return "/v1/refusals", &ledgerv1.AppendRefusalRequest{ClaimedPrincipal: r.ClaimedPrincipal, ClaimedAgent: r.ClaimedAgent, RequestJwt: r.RequestJWT,
			Action: &ledgerv1.RefusalAction{Tool: r.Action.Tool, Target: r.Action.Target}, Reason: r.Reason, ObservedAt: timestamp(r.ObservedAt)}, nil
	case item.Revocation != nil && item.Revocation.GrantID != "":
		r := item.Revocation
		return "/v1/grants/" + url.PathEscape(r.GrantID) + ":revoke",
			&ledgerv1.RevokeGrantRequest{GrantId: r.GrantID, RevokedAt: timestamp(r.RevokedAt), Note: r.Note}, nil
	}
	return "", nil, fmt.Errorf("%w: an empty outbox entry", ErrRejected)
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// Post implements Sink.
func (c *LedgerClient) Post(ctx context.Context, item LedgerItem) error {
	path, msg, err := ledgerRequest(item)
	if err != nil {
		return err
	}
	body, err := protojson.Marshal(msg)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Key)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	msgText, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	switch {
	case res.StatusCode == http.StatusOK:
		return nil
	case res.StatusCode == http.StatusBadRequest || res.StatusCode == http.StatusRequestEntityTooLarge || res.StatusCode == http.StatusGone || res.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: HTTP %d %s", ErrRejected, res.StatusCode, msgText)
	}
	return fmt.Errorf("ledger answered HTTP %d %s", res.StatusCode, msgText)
}

func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// enqueue adds an entry to the durable outbox in tx.
func enqueue(tx *bolt.Tx, p LedgerItem) error {
	b := tx.Bucket(bPipeline)
	n, err := b.NextSequence()
	if err != nil {
		return err
	}
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return b.Put(seqKey(n), v)
}

// PipelineDepth is the number of receipts, refusals and revocations
// waiting for the ledger.
func (p *Provider) PipelineDepth() int {
	n := 0
	_ = p.store.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bPipeline).Stats().KeyN
		return nil
	})
	return n
}

// RunPipeline posts the outbox to sink in order until ctx is done. A
// receipt leaves the outbox only when the ledger has it (or refused it as
// invalid: it is then kept aside in pipeline_rejected and logged); while the
// ledger is down, the outbox waits and retries with backoff, losing nothing.
func (p *Provider) RunPipeline(ctx context.Context, sink Sink) error {
	retry.Drain(ctx, retry.Config{}, p.pipeWake,
		func(ctx context.Context) (int, error) { return p.drain(ctx, sink) },
		func(err error, wait time.Duration) {
			p.cfg.Logger.WarnContext(ctx, "posting receipts to the ledger failed; will retry", slog.String("error", err.Error()), slog.Duration("retry_in", wait), slog.Int("waiting", p.PipelineDepth()))
		})
	return nil
}

// drain posts waiting receipts in order until the outbox is empty or a post
// fails.
func (p *Provider) drain(ctx context.Context, sink Sink) (int, error) {
	sent := 0
	for {
		var key []byte
		var post LedgerItem
		err := p.store.db.View(func(tx *bolt.Tx) error {
			k, v := tx.Bucket(bPipeline).Cursor().First()
			if k == nil {
				return nil
			}
			key = append([]byte(nil), k...)
			return decodeItem(v, &post)
		})
		if err != nil || key == nil {
			return sent, err
		}
		perr := sink.Post(ctx, post)
		if perr != nil && !errors.Is(perr, ErrRejected) {
			return sent, perr
		}
		err = p.store.db.Update(func(tx *bolt.Tx) error {
			if perr != nil {
				p.cfg.Logger.ErrorContext(ctx, "the ledger rejected an outbox entry; kept aside", slog.String("error", perr.Error()))
				v, _ := json.Marshal(post)
				if err := tx.Bucket(bDead).Put(key, v); err != nil {
					return err
				}
			}
			return tx.Bucket(bPipeline).Delete(key)
		})
		if err != nil {
			return sent, err
		}
		sent++
	}
}

// decodeItem reads an outbox entry. Entries queued before the outbox held
// refusals and revocations are bare receipts.
func decodeItem(v []byte, item *LedgerItem) error {
	if err := json.Unmarshal(v, item); err != nil {
		return err
	}
	if item.Receipt == nil && item.Refusal == nil && item.Revocation == nil {
		var old LedgerPost
		if err := json.Unmarshal(v, &old); err == nil && old.ReceiptJWS != "" {
			item.Receipt = &old
		}
	}
	return nil
}

func (p *Provider) wakePipeline() {
	select {
	case p.pipeWake <- struct{}{}:
	default:
	}
}
