package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
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

// ErrKeysUnavailable: the ledger answered an entry undecided because the
// keys of one of its signers (a Brand, the personal agent) could not be
// fetched, and asked for it again later (its ErrKeysUnavailable: gRPC
// UNAVAILABLE, REST 503). Retried, like any error but ErrRejected; Run
// moves such an entry to the outbox's end rather than wait on it.
var ErrKeysUnavailable = errors.New("the ledger could not fetch a signer's keys")

// keysUnavailableText begins the message of the ledger's answer for
// ErrKeysUnavailable (ledger.ErrKeysUnavailable's text).
const keysUnavailableText = "signing keys unavailable; retry"

// keysUnavailable reports whether code and msg are the ledger's answer
// undecided for a signer's keys.
func keysUnavailable(code codes.Code, msg string) bool {
	return code == codes.Unavailable && strings.HasPrefix(msg, keysUnavailableText)
}

// LedgerClient posts receipts, refusals and revocations to a ledger's REST
// API with a writer key. The bodies are the generated ledgerv1 request
// messages in protojson, as the ledger's gateway reads them, so the
// pipeline follows the ledger's contract rather than a copy of it.
type LedgerClient struct {
	URL  string // such as http://127.0.0.1:8080
	Key  string
	HTTP *http.Client
	// Statement, when set, signs the Provider's statement of a
	// revocation it posts (RevokeGrantRequest.provider_statement,
	// docs/design/045): "" when it has none to make. A revocation whose
	// statement the ledger refuses is posted again without it, and Logger,
	// when set, says so: the revocation is what makes later receipts
	// incidents.
	Statement func(grant string, at time.Time) (string, error)
	Logger    *slog.Logger
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
			Action: &ledgerv1.RefusalAction{Tool: r.Action.Tool, Target: r.Action.Target}, Reason: r.Reason, ObservedAt: timestamp(r.ObservedAt),
			DelegationToken: r.DelegationToken}, nil
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

// Post implements Sink. The ledger has item when it answers 200 with its
// record of item: the row of the receipt posted (by its receiptId), the
// refusal row of the refusal posted, the revocation of the grant named.
// Any other answer, a 200 included, leaves item to be posted again.
func (c *LedgerClient) Post(ctx context.Context, item Item) error {
	path, msg, err := ledgerRequest(item)
	if err != nil {
		return err
	}
	if req, ok := msg.(*ledgerv1.RevokeGrantRequest); ok && c.Statement != nil && !item.Revocation.RevokedAt.IsZero() {
		st, err := c.Statement(req.GrantId, item.Revocation.RevokedAt)
		if err != nil {
			return fmt.Errorf("sign the statement of grant %s's revocation: %w", req.GrantId, err)
		}
		if st != "" {
			stated := proto.CloneOf(req)
			stated.ProviderStatement = st
			body, err := c.post(ctx, path, stated)
			if !errors.Is(err, ErrRejected) {
				if err != nil {
					return err
				}
				return recordOf(item, body)
			}
			if c.Logger != nil {
				c.Logger.ErrorContext(ctx, "the ledger refused the Provider's statement of a revocation; posting the revocation without it, which a copy of the Provider's store from before it will not honour",
					slog.String("grant", req.GrantId), slog.String("error", err.Error()))
			}
		}
	}
	body, err := c.post(ctx, path, msg)
	if errors.Is(err, errRowExpired) && item.Revocation == nil {
		// The ledger recorded it, and its retention has since run out:
		// an entry sent again after a crash, past the row's retention.
		return nil
	}
	if err != nil {
		return err
	}
	return recordOf(item, body)
}

// reasonExpired is the ErrorInfo reason of the ledger's answer for a row
// recorded and since swept by retention.
const reasonExpired = "ROW_EXPIRED"

// errRowExpired: the ledger answered that the row of what was posted was
// recorded and removed by its retention (410 with reason ROW_EXPIRED).
var errRowExpired = errors.New("the ledger recorded it and its retention has run out")

// recordOf checks that body, the ledger's 200 to item, is its record of
// item.
func recordOf(item Item, body []byte) error {
	var rep struct {
		Row struct {
			ReceiptID string `json:"receiptId"`
			Kind      string `json:"kind"`
			Refusal   struct {
				ClaimedPrincipal string `json:"claimedPrincipal"`
				Reason           string `json:"reason"`
			} `json:"refusal"`
		} `json:"row"`
		GrantID string `json:"grantId"`
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		return fmt.Errorf("the ledger's answer is not its record of the entry: %w", err)
	}
	var ok bool
	switch {
	case item.Receipt != nil:
		ok = rep.Row.ReceiptID == ReceiptID(item.Receipt.ReceiptJWS)
	case item.Refusal != nil:
		ok = rep.Row.Kind == "ROW_KIND_REFUSAL" && rep.Row.Refusal.ClaimedPrincipal == item.Refusal.ClaimedPrincipal &&
			rep.Row.Refusal.Reason == item.Refusal.Reason
	case item.Revocation != nil:
		ok = rep.GrantID == item.Revocation.GrantID
	}
	if !ok {
		return fmt.Errorf("the ledger's answer is not its record of the entry: %.200s", body)
	}
	return nil
}

// ReceiptID is the receiptId of the ledger's row of the receipt jws, as
// posted: "sha256:" and the hex SHA-256 of its bytes.
func ReceiptID(jws string) string {
	sum := sha256.Sum256([]byte(jws))
	return "sha256:" + hex.EncodeToString(sum[:])
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
			if got, want := r.Response.Row.ReceiptID, ReceiptID(items[i].Receipt.ReceiptJWS); got != want {
				errs[i] = fmt.Errorf("the ledger answered receipt %s with the row of %q", want, got)
			}
		case codes.NotFound:
			if r.Reason == reasonExpired {
				// Recorded, and since swept by retention: as Post, delivered.
				break
			}
			errs[i] = fmt.Errorf("%w: %s: %s", ErrRejected, code, r.Message)
		case codes.InvalidArgument:
			errs[i] = fmt.Errorf("%w: %s: %s", ErrRejected, code, r.Message)
		case codes.Unavailable:
			errs[i] = fmt.Errorf("the ledger answered %s: %s", code, r.Message)
			if keysUnavailable(code, r.Message) {
				errs[i] = fmt.Errorf("%w: %s: %s", ErrKeysUnavailable, code, r.Message)
			}
		default:
			errs[i] = fmt.Errorf("the ledger answered %s: %s", code, r.Message)
		}
	}
	return errs, nil
}

// batchAnswer is what the pipeline reads of AppendReceipts' answer
// (ledgerv1.AppendReceiptsResponse as the gateway writes it): each
// result's code and message, and the receiptId of its row, by their JSON
// names. The rest of the row is the ledger's record, which the pipeline
// does not keep; reading these fields alone skips building a message for
// every row, which with protojson was most of what a batch's answer cost
// the pipeline (about 32 µs a receipt against 18: BenchmarkBatchAnswer).
type batchAnswer struct {
	Results []struct {
		Code     int32  `json:"code"`
		Message  string `json:"message"`
		Reason   string `json:"reason"`
		Response struct {
			Row struct {
				ReceiptID string `json:"receiptId"`
			} `json:"row"`
		} `json:"response"`
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
	hc := http.Client{Timeout: 30 * time.Second}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	// A redirect is not the ledger's answer: followed, a POST becomes a
	// GET elsewhere, whose answer would be read as the ledger's.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
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
		// Refused for good only when the ledger says so, in its status
		// body: the same code from a proxy or front in the way (a path it
		// does not route, its own body limit) is retried.
		switch {
		case res.StatusCode == http.StatusGone && expiredRow(msgText):
			return nil, fmt.Errorf("%w: %s", errRowExpired, msgText)
		case ledgerStatus(msgText):
			return nil, fmt.Errorf("%w: HTTP %d %s", ErrRejected, res.StatusCode, msgText)
		}
	case http.StatusServiceUnavailable:
		if keysStatus(msgText) {
			return nil, fmt.Errorf("%w: HTTP %d %s", ErrKeysUnavailable, res.StatusCode, msgText)
		}
	}
	return nil, fmt.Errorf("ledger answered HTTP %d %s", res.StatusCode, msgText)
}

// expiredRow reports whether body is the ledger's status saying the row
// asked for was removed by retention: an ErrorInfo of reason ROW_EXPIRED.
func expiredRow(body []byte) bool {
	var st struct {
		Details []struct {
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		} `json:"details"`
	}
	if !ledgerStatus(body) || json.Unmarshal(body, &st) != nil {
		return false
	}
	for _, d := range st.Details {
		if d.Reason == reasonExpired && d.Domain == "pactledger" {
			return true
		}
	}
	return false
}

// keysStatus reports whether body is the ledger's status saying a
// signer's keys could not be fetched (ErrKeysUnavailable): a proxy's 503
// in the way is not.
func keysStatus(body []byte) bool {
	var st struct {
		Code    int32  `json:"code"`
		Message string `json:"message"`
	}
	return ledgerStatus(body) && json.Unmarshal(body, &st) == nil && keysUnavailable(codes.Code(st.Code), st.Message)
}

// ledgerStatus reports whether body is an error as the ledger's REST API
// writes one: a JSON google.rpc.Status with a code and a message.
func ledgerStatus(body []byte) bool {
	var st struct {
		Code    *int32  `json:"code"`
		Message *string `json:"message"`
	}
	return json.Unmarshal(body, &st) == nil && st.Code != nil && *st.Code != 0 && st.Message != nil
}

// maxAnswer bounds what the pipeline reads of the ledger's answer: a
// batch's rows (a row is a few KiB).
const maxAnswer = 8 << 20
