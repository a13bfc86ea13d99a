package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// Sink receives the outbox, in order. It returns an error wrapping
// ErrRejected when retrying cannot help (the ledger refused the input);
// any other error is retried.
type Sink interface {
	Post(ctx context.Context, item Item) error
}

// BatchSink is a Sink that also takes receipts together. PostReceipts
// returns each receipt's error in their order (nil: the ledger has it; one
// wrapping ErrRejected: refused as invalid; any other: to be posted again),
// or an error for the call as a whole, wrapping ErrRejected when the
// ledger refused the call itself.
type BatchSink interface {
	Sink
	PostReceipts(ctx context.Context, items []Item) ([]error, error)
}

// ErrRejected: the ledger refused an entry as invalid input.
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
func ledgerRequest(item Item) (string, proto.Message, error) {
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
func (c *LedgerClient) Post(ctx context.Context, item Item) error {
	path, msg, err := ledgerRequest(item)
	if err != nil {
		return err
	}
	_, err = c.post(ctx, path, msg)
	return err
}

// PostReceipts implements BatchSink with one AppendReceipts call.
func (c *LedgerClient) PostReceipts(ctx context.Context, items []Item) ([]error, error) {
	req := &ledgerv1.AppendReceiptsRequest{}
	for _, it := range items {
		_, msg, err := ledgerRequest(it)
		r, ok := msg.(*ledgerv1.AppendReceiptRequest)
		if err != nil || !ok {
			return nil, fmt.Errorf("%w: not a receipt: %v", ErrRejected, err)
		}
		req.Receipts = append(req.Receipts, r)
	}
	body, err := c.post(ctx, "/v1/receipts:batch", req)
	if err != nil {
		return nil, err
	}
	var rep batchAnswer
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, fmt.Errorf("the ledger's answer to a batch: %w", err)
	}
	if len(rep.Results) != len(items) {
		return nil, fmt.Errorf("the ledger answered %d results for %d receipts", len(rep.Results), len(items))
	}
	errs := make([]error, len(items))
	for i, r := range rep.Results {
		switch code := codes.Code(r.Code); code {
		case codes.OK:
		case codes.InvalidArgument, codes.NotFound:
			errs[i] = fmt.Errorf("%w: %s: %s", ErrRejected, code, r.Message)
		default:
			errs[i] = fmt.Errorf("the ledger answered %s: %s", code, r.Message)
		}
	}
	return errs, nil
}

// batchAnswer is what the pipeline reads of AppendReceipts' answer
// (ledgerv1.AppendReceiptsResponse as the gateway writes it): each
// result's code and message, by their JSON names. The row each result
// also carries is the ledger's record, which the pipeline does not keep;
// reading the two fields alone skips building a message for every row,
// which with protojson was most of what a batch's answer cost the
// pipeline (about 32 µs a receipt against 18: BenchmarkBatchAnswer).
type batchAnswer struct {
	Results []struct {
		Code    int32  `json:"code"`
		Message string `json:"message"`
	} `json:"results"`
}

// post sends msg to path and returns the answer's body when it is 200.
func (c *LedgerClient) post(ctx context.Context, path string, msg proto.Message) ([]byte, error) {
	body, err := protojson.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRejected, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("ledger request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Key)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post to the ledger: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
		if err != nil {
			return nil, fmt.Errorf("the ledger's answer: %w", err)
		}
		return b, nil
	}
	msgText, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	switch res.StatusCode {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusGone, http.StatusNotFound, http.StatusMethodNotAllowed:
		return nil, fmt.Errorf("%w: HTTP %d %s", ErrRejected, res.StatusCode, msgText)
	}
	return nil, fmt.Errorf("ledger answered HTTP %d %s", res.StatusCode, msgText)
}

// maxAnswer bounds what the pipeline reads of the ledger's answer: a
// batch's rows (a row is a few KiB).
const maxAnswer = 8 << 20
