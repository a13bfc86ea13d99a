// Package drill runs the dispute drill of the receipt-ledger playbook
// (step 6): six timed pulls per row, each passed or failed with its detail,
// from the ledger alone, and a plain-words reply for the customer. It also
// runs the monthly drill on random rows and keeps every report as a
// write-once object. A pull that would need a person (missing evidence,
// missing snapshot, unreachable store) fails with the reason; nothing waits.
package drill

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pactledger/pactledger/internal/termtext"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Pull names, in drill order.
const (
	PullReceiptRow    = "receipt_row"
	PullGrant         = "grant"
	PullActionLog     = "action_log"
	PullAgentIdentity = "agent_identity"
	PullReverify      = "reverify"
	PullDecision      = "decision"
)

// Pulls lists the six pulls in order.
var Pulls = []string{PullReceiptRow, PullGrant, PullActionLog, PullAgentIdentity, PullReverify, PullDecision}

// Kind is the kind of a drill.
type Kind string

// Drill kinds.
const (
	Dispute Kind = "dispute"
	Monthly Kind = "monthly"
)

// MaxRows caps the rows one dispute drill covers, and the read-only turns
// it lists.
const MaxRows = 20

// A dispute drill reads the rows of its target or customer lookupPage at
// a time, newest first, until it has the rows to drill (those that
// changed something) or has read maxScanned rows: the action disputed may
// sit behind many newer look-ups, and, looked up by target and customer,
// behind rows of other principals that any writer can post under the
// order. maxScanned counts the rows the ledger read, whether they matched
// or not (ledger.Query.Read), not the rows found.
const lookupPage = 200

// maxScanned is a var only for tests (SetMaxScanned).
var maxScanned = 10_000

// Request says what to drill: a dispute drill names a target (order id), a
// row or a principal (target and principal may be combined); a monthly
// drill samples rows.
type Request struct {
	Target    string `json:"target,omitempty"`
	RowID     string `json:"rowId,omitempty"`
	Principal string `json:"principal,omitempty"`
	Monthly   bool   `json:"monthly,omitempty"`
	Sample    int    `json:"sample,omitempty"`
}

// Pull is one timed pull of one row.
type Pull struct {
	RowID     string  `json:"rowId"`
	Name      string  `json:"name"`
	Passed    bool    `json:"passed"`
	ElapsedMs float64 `json:"elapsedMs"`
	Detail    string  `json:"detail"`
}

// Report is one drill's scored result.
type Report struct {
	ID           string    `json:"id"`
	Kind         Kind      `json:"kind"`
	Request      Request   `json:"request"`
	StartedAt    time.Time `json:"startedAt"`
	FinishedAt   time.Time `json:"finishedAt"`
	Rows         []string  `json:"rows"`
	Pulls        []Pull    `json:"pulls"`
	ChecksPassed int       `json:"checksPassed"`
	ChecksTotal  int       `json:"checksTotal"`
	Reply        string    `json:"reply,omitempty"` // as sent without proof files (see ReplyWithProof)
	RunBy        string    `json:"runBy,omitempty"`
	// Checkpoint is the Merkle log's latest signed checkpoint when the
	// drill ran; empty when the ledger keeps no log.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Proofs holds each drilled row's inclusion proof, in Rows order.
	Proofs []RowProof `json:"proofs,omitempty"`
	// Note says what the drill covered when that is not simply its rows:
	// a monthly sample larger than the eligible rows, nothing to drill;
	// and, for a monthly drill, the drill pool's count against the rows
	// read beside it (checkPool).
	Note string `json:"note,omitempty"`
	// Listed are rows found but not scored: read-only turns, whose evidence
	// is by design not kept and which changed nothing.
	Listed []Listed `json:"listed,omitempty"`
}

// Listed is a row a dispute drill found but did not score, and why.
type Listed struct {
	RowID  string `json:"rowId"`
	Detail string `json:"detail"`
}

// RowProof is a drilled row's inclusion proof in the Merkle log: a bundle
// that verifies offline with the log's published key, or why there is
// none yet (a row committed but not yet integrated; not a failed pull).
type RowProof struct {
	RowID  string        `json:"rowId"`
	Bundle *proof.Bundle `json:"bundle,omitempty"`
	Detail string        `json:"detail,omitempty"`
}

// ProofAttached is the sentence a dispute drill's reply ends with when
// proof files are attached (ReplyWithProof).
const ProofAttached = "Attached is a proof file for this record: it shows the record is in our tamper-evident ledger log, and anyone can check it with our published log key, without relying on us."

// ReplyWithProof is the reply to send with the drilled rows' proof files
// attached: Reply ending with ProofAttached. It is empty when no drilled
// row has a proof bundle, and for a monthly drill. Only whoever attaches
// the files knows they go with the reply: Reply itself never says so.
func (r *Report) ReplyWithProof() string {
	if r.Kind != Dispute || r.Reply == "" {
		return ""
	}
	for _, p := range r.Proofs {
		if p.Bundle != nil {
			// The last of the reply's (at most two) paragraphs.
			return r.Reply + " " + ProofAttached
		}
	}
	return ""
}

// Config holds a Runner's optional settings.
type Config struct {
	// Now is the clock for report times; default time.Now.
	Now func() time.Time
	// DefaultSample is the monthly drill's sample size; default 5.
	DefaultSample int
	// Rand returns a uniform random int in [0, n); default math/rand/v2.
	Rand func(n int) int
	// Names are the words the customer reply uses for brands, scopes,
	// tools and agent platforms; ids where it has none.
	Names Names
}

// Runner runs drills against a ledger.
type Runner struct {
	l   *ledger.Ledger
	cfg Config
}

// ErrInvalid: the drill request names nothing to drill.
var ErrInvalid = errors.New("invalid drill request")

// New returns a Runner.
func New(l *ledger.Ledger, cfg Config) *Runner {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DefaultSample <= 0 {
		cfg.DefaultSample = 5
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.IntN
	}
	return &Runner{l: l, cfg: cfg}
}

// Run runs the drill req asks for, by the named key, and stores its report.
func (r *Runner) Run(ctx context.Context, req Request, by string) (*Report, error) {
	rep := &Report{Kind: Dispute, Request: req, StartedAt: r.cfg.Now().UTC(), RunBy: by}
	if req.Monthly {
		if req.Target != "" || req.RowID != "" || req.Principal != "" {
			return nil, fmt.Errorf("%w: a monthly drill takes only a sample size", ErrInvalid)
		}
		if req.Sample < 0 || req.Sample > 100 {
			return nil, fmt.Errorf("%w: sample must be between 1 and 100", ErrInvalid)
		}
		if req.Sample == 0 {
			rep.Request.Sample = r.cfg.DefaultSample
		}
		rep.Kind = Monthly
		r.monthly(ctx, rep)
	} else {
		if req.Target == "" && req.RowID == "" && req.Principal == "" {
			return nil, fmt.Errorf("%w: name a target (order id), a rowId or a principal", ErrInvalid)
		}
		if req.RowID != "" && !ledger.ValidID(req.RowID) {
			return nil, fmt.Errorf("%w: rowId must be 64 lowercase hex characters", ErrInvalid)
		}
		if req.RowID != "" && req.Target != "" {
			// A drill by row reads that row alone: a target beside it
			// would be ignored, and the report read as one of the order.
			return nil, fmt.Errorf("%w: name a target (order id) or a rowId, not both", ErrInvalid)
		}
		r.dispute(ctx, rep)
	}
	r.attachLog(ctx, rep)
	rep.FinishedAt = r.cfg.Now().UTC()
	for _, p := range rep.Pulls {
		rep.ChecksTotal++
		if p.Passed {
			rep.ChecksPassed++
		}
	}
	rep.ID = ledger.NewDrillID(rep.StartedAt)
	body, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	if err := r.l.SaveDrill(ctx, rep.ID, rep.StartedAt, body); err != nil {
		return nil, err
	}
	return rep, nil
}

// Get returns a stored report.
func (r *Runner) Get(ctx context.Context, id string) (*Report, ledger.Location, error) {
	body, loc, err := r.l.Drill(ctx, id)
	if err != nil {
		return nil, loc, err
	}
	rep, err := decodeReport(body)
	if err != nil {
		return nil, loc, fmt.Errorf("drill %s: %w", id, err)
	}
	return rep, loc, nil
}

// List returns stored reports, newest first.
func (r *Runner) List(ctx context.Context, pageSize int, pageToken string) ([]*Report, string, error) {
	return r.ListWithin(ctx, pageSize, pageToken, 0, nil)
}

// ListWithin is List with a page that also ends before the report that
// would take the sizes of its reports, as size measures them, past budget:
// the page holds at least one report, and its token continues after its
// last report. A budget of 0 bounds nothing.
func (r *Runner) ListWithin(ctx context.Context, pageSize int, pageToken string, budget int, size func(*Report) int) ([]*Report, string, error) {
	// The reports size measured, each with the body it was decoded from:
	// the page's reports are the first of them, decoded once.
	type measured struct {
		body []byte
		rep  *Report
	}
	var seen []measured
	var sizeOf func([]byte) int
	if budget > 0 {
		sizeOf = func(b []byte) int {
			rep, err := decodeReport(b)
			seen = append(seen, measured{b, rep})
			if err != nil {
				return len(b) // its error is returned below
			}
			return size(rep)
		}
	}
	bodies, next, err := r.l.DrillsWithin(ctx, pageSize, pageToken, budget, sizeOf)
	if err != nil {
		return nil, "", err
	}
	out := make([]*Report, 0, len(bodies))
	for i, b := range bodies {
		var rep *Report
		if i < len(seen) && bytes.Equal(seen[i].body, b) {
			rep = seen[i].rep
		}
		if rep == nil {
			if rep, err = decodeReport(b); err != nil {
				return nil, "", err
			}
		}
		out = append(out, rep)
	}
	return out, next, nil
}

// decodeReport decodes a stored report. Earlier versions ended a dispute
// drill's stored reply with ProofAttached whenever a row had a proof:
// its Reply is read without it (ReplyWithProof has it).
func decodeReport(body []byte) (*Report, error) {
	var rep Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, fmt.Errorf("decode drill: %w", err)
	}
	if rep.Kind == Dispute {
		rep.Reply = strings.TrimSuffix(rep.Reply, " "+ProofAttached)
	}
	return &rep, nil
}

// attachLog adds the log's checkpoint and each drilled row's inclusion
// proof to the report, noting in the row's receipt_row pull where it is in
// the log (or that it is not yet). Nothing here fails a pull.
func (r *Runner) attachLog(ctx context.Context, rep *Report) {
	for _, id := range rep.Rows {
		b, err := r.l.Proof(ctx, id)
		var note string
		switch {
		case errors.Is(err, ledger.ErrNoLog):
			return
		case errors.Is(err, ledger.ErrNotLogged):
			rep.Proofs = append(rep.Proofs, RowProof{RowID: id, Detail: "committed but not yet in a signed checkpoint of the Merkle log published to write-once storage; its proof is available once it is (within a second while that storage takes writes)"})
			note = "not yet in a signed checkpoint of the Merkle log published to write-once storage (committed; proof available once it is)"
		case err != nil:
			rep.Proofs = append(rep.Proofs, RowProof{RowID: id, Detail: "proof unavailable: " + err.Error()})
			note = "its Merkle log proof could not be read: " + err.Error()
		default:
			rep.Proofs = append(rep.Proofs, RowProof{RowID: id, Bundle: b})
			note = fmt.Sprintf("in the Merkle log as leaf %d under the signed checkpoint of size %s", b.LeafIndex, checkpointSize(b.Checkpoint))
		}
		for i := range rep.Pulls {
			if p := &rep.Pulls[i]; p.RowID == id && p.Name == PullReceiptRow {
				p.Detail += "; " + note
			}
		}
	}
	if cp, err := r.l.Checkpoint(ctx); err == nil {
		rep.Checkpoint = string(cp)
	}
}

// checkpointSize is the size line of a signed checkpoint.
func checkpointSize(signed string) string {
	body, _, _ := strings.Cut(signed, "\n\n")
	c, err := proof.ParseCheckpoint(body + "\n")
	if err != nil {
		return "?"
	}
	return fmt.Sprint(c.Size)
}

// timer measures one pull.
type timer struct{ start time.Time }

func startTimer() timer { return timer{time.Now()} }

func (t timer) pull(rowID, name string, passed bool, format string, args ...any) Pull {
	return Pull{RowID: rowID, Name: name, Passed: passed, ElapsedMs: float64(time.Since(t.start).Microseconds()) / 1000, Detail: fmt.Sprintf(format, args...)}
}

// failAll fails every pull of a drill that found no row.
func failAll(rep *Report, t timer, detail string) {
	rep.Pulls = append(rep.Pulls, t.pull("", PullReceiptRow, false, "%s", detail))
	for _, name := range Pulls[1:] {
		rep.Pulls = append(rep.Pulls, Pull{Name: name, Detail: "not run: no receipt row to drill"})
	}
}

func (r *Runner) dispute(ctx context.Context, rep *Report) {
	req := rep.Request
	t := startTimer()
	var rows []*ledger.Row
	var lookups int // read-only turns found
	// unvouched are the refusals a drill by customer alone found whose
	// customer is the name the writer claimed: counted and named, not
	// drilled (a drill by their order drills them).
	var unvouched []*ledger.Row
	var cut string // the rows left out of the drill, in words; "" when none
	left := 0      // how many rows were left out (at least, when capped)
	switch {
	case req.RowID != "":
		row, err := r.l.Get(ctx, req.RowID)
		if err != nil {
			failAll(rep, t, fmt.Sprintf("row %s: %v", req.RowID, err))
			rep.Reply = "We could not find a record of this action in our ledger; a member of our team will look into it."
			return
		}
		rows = []*ledger.Row{row}
	default:
		// The rows that changed something are drilled, MaxRows of them at
		// most (rank); read-only turns are listed, not scored. Every page
		// is read, up to maxScanned rows: a row's place in the lookup
		// (newest first by the time the receipt claims) is a writer's
		// word until a signature vouches for it.
		capped := false
		scanned := 0 // rows read, matching or not
		q := ledger.Query{Target: req.Target, Principal: req.Principal, PageSize: lookupPage, Read: &scanned}
		for {
			q.MaxRead = maxScanned - scanned
			found, next, err := r.l.List(ctx, q)
			if err != nil {
				failAll(rep, t, fmt.Sprintf("lookup failed: %v", err))
				return
			}
			for _, row := range found {
				switch {
				case readOnly(row):
					// A dispute is about what changed: a read-only turn is
					// listed, not scored (its evidence is by design not kept).
					if lookups++; len(rep.Listed) < MaxRows {
						rep.Listed = append(rep.Listed, Listed{RowID: row.ID, Detail: fmt.Sprintf("read-only turn %s on %s at %s (%s): listed, not scored; it changed nothing and its evidence is by design not kept",
							tools(row), targets(row), clock(row.IssuedAt), strings.ToLower(row.Status.String()))})
					}
				case row.Kind == ledger.KindReceipt || req.Target != "" || row.TokenVouches():
					// By customer alone, a refusal is drilled when the
					// Brand's signature on its delegation token names the
					// customer (ledger.Row.TokenVouches).
					rows = append(rows, row)
				case row.Kind == ledger.KindRefusal:
					unvouched = append(unvouched, row)
				}
			}
			if next == "" {
				break
			}
			if scanned >= maxScanned {
				capped = true
				break
			}
			q.PageToken = next
		}
		newest := ""
		if capped {
			newest = " newest"
		}
		if len(rows) == 0 && capped {
			// The rows after the first maxScanned read were not read:
			// the action disputed may be one of them.
			if lookups > 0 {
				rep.Note = fmt.Sprintf("the lookup stopped after reading %d rows; those found about %s are read-only turns; any after them were not read", scanned, describeQuery(req))
				failAll(rep, t, fmt.Sprintf("needs a person: the lookup stopped after reading %d rows: the %d newest rows about %s are read-only turns, and any after them, which may hold the action disputed, were not drilled", scanned, lookups, describeQuery(req)))
			} else {
				rep.Note = fmt.Sprintf("the lookup stopped after reading %d rows, none of them about %s; any after them were not read", scanned, describeQuery(req))
				failAll(rep, t, fmt.Sprintf("needs a person: the lookup stopped after reading %d rows, none of them about %s: any after them, which may hold the action disputed, were not read", scanned, describeQuery(req)))
			}
			finding := fmt.Sprintf("We hold more records about %s that this check did not cover.", describeQuery(req))
			if lookups == 0 {
				// None read was about the order: the ledger does not know
				// it holds one.
				finding = fmt.Sprintf("Our ledger holds more records than this check could read, and it found none yet about %s.", describeQuery(req))
			}
			rep.Reply = compose([]answer{{finding: finding, closing: "A member of our team will go through them and get back to you."}})
			return
		}
		if len(rows) == 0 && lookups > 0 {
			rep.Note = fmt.Sprintf("nothing to drill: the %d%s rows about %s are read-only turns, which changed nothing", lookups, newest, describeQuery(req))
			if lookups == 1 {
				rep.Note = fmt.Sprintf("nothing to drill: the one row about %s is a read-only turn, which changed nothing", describeQuery(req))
			}
			rep.Reply = fmt.Sprintf("The only records we hold about %s are look-ups your agent made: they showed information and changed nothing.", describeQuery(req))
			// person is why a person must look, when the reply promises
			// the customer that one will: the drill then does not pass.
			person := ""
			if len(unvouched) > 0 {
				// Not the only records: refusals under the customer's
				// name are held, which no signature ties to them.
				rep.Note += unvouchedWords(req, unvouched)
				person = unvouchedWords(req, unvouched)
				rep.Reply = fmt.Sprintf("The records we hold about %s that our checks tie to you are look-ups your agent made: they showed information and changed nothing. We hold other records under your name, which a member of our team will check.", describeQuery(req))
			}
			if others := r.otherNames(ctx, req); others != "" {
				// The customer's own attempts may be filed under another
				// name (a refusal of a request made without a grant is
				// filed under the name the writer claimed): say so to
				// the lead, and do not tell the customer these are all.
				rep.Note += others
				person += others
				rep.Reply = fmt.Sprintf("The records we hold about %s under your account are look-ups your agent made: they showed information and changed nothing. We hold other records about %s, which a member of our team will check.", describeQuery(req), req.Target)
			}
			if spellings := r.otherSpellings(ctx, req); spellings != "" {
				rep.Note += spellings
				switch {
				case req.Principal != "":
					// The customer's own rows are filed under the id in
					// another case, which the lookup, by exact id, does
					// not read: the action disputed may be one of them.
					person += spellings
					rep.Reply = fmt.Sprintf("The records we hold filed under %s are look-ups your agent made: they showed information and changed nothing. We hold other records under your account, filed under a similar id, which a member of our team will check.", describeQuery(req))
				default:
					// By order alone the rows under the other case may be
					// another order's, of another customer (ids are case
					// sensitive), and any writer key can file one there:
					// the lead is told, the drill does not fail for them,
					// and the reply neither names them nor says the
					// look-ups are the only records.
					rep.Reply = fmt.Sprintf("The records we hold filed under %s are look-ups your agent made: they showed information and changed nothing.", describeQuery(req))
				}
			}
			if person != "" {
				failAll(rep, t, fmt.Sprintf("needs a person: the rows about %s tied to the customer are read-only turns%s", describeQuery(req), person))
			}
			return
		}
		if len(rows) == 0 && len(unvouched) > 0 {
			rep.Note = strings.TrimPrefix(unvouchedWords(req, unvouched), "; ")
			failAll(rep, t, fmt.Sprintf("needs a person: no row about %s that a signature ties to the customer%s", describeQuery(req), unvouchedWords(req, unvouched)))
			rep.Reply = "We hold records under your name that our checks could not tie to you; a member of our team will look into them and get back to you."
			return
		}
		if len(rows) == 0 {
			// The lookup matched ids exactly: a row filed under another
			// spelling of the order id (a pipeline that changes its case,
			// or a writer's choice), or under another order, is not
			// found. The reply says what was searched, not that no record
			// exists, and the lead is told where to look next.
			spellings := r.otherSpellings(ctx, req)
			next := "drill the customer alone (--principal) too: a row about the order may be filed under another spelling of its id, or another order"
			if req.Target == "" {
				next = "drill the order too: a refusal's customer is the name the writer claimed"
			}
			failAll(rep, t, fmt.Sprintf("needs a person: no row filed under %s%s%s (ids match exactly: check the spelling and the case); %s", describeQuery(req), r.otherNames(ctx, req), spellings, next))
			rep.Note = fmt.Sprintf("no row filed under %s (ids match exactly)%s; %s", describeQuery(req), spellings, next)
			switch {
			case req.Target == "":
				rep.Reply = "We found no record filed under your account in our ledger; a member of our team will look into it and get back to you."
			case spellings != "" && req.Principal != "":
				// The customer's own rows under the id in another case:
				// rows of others there are the lead's to look at, never
				// the reply's (another order may be spelled so).
				rep.Reply = "We found no record filed under order " + req.Target + " exactly as written; we hold records under your account filed under a similar id, which a member of our team will check and get back to you."
			default:
				rep.Reply = "We found no record filed under order " + req.Target + " in our ledger; a member of our team will also look for it under your account and get back to you."
			}
			return
		}
		rank(rows)
		var notes []string
		if len(rows) > MaxRows || capped {
			left = len(rows) - min(len(rows), MaxRows)
			notes = append(notes, fmt.Sprintf("%s about %s found, %d drilled (receipts whose signature verified first, each receipt's first row before the rows that repeat it, newest first; then the others by the time the ledger recorded them, newest first); %d left out, not drilled",
				plural(len(rows), "row"), describeQuery(req), min(len(rows), MaxRows), left))
			cut = fmt.Sprintf("%s about %s left out of this drill", plural(left, "more row"), describeQuery(req))
			if capped {
				notes = append(notes, fmt.Sprintf("the lookup stopped after reading %d rows: any after them were not drilled either", scanned))
				cut = fmt.Sprintf("%d or more rows about %s left out of this drill (the lookup stopped after reading %d rows)", left, describeQuery(req), scanned)
			}
			rows = rows[:min(len(rows), MaxRows)]
		}
		if lookups > 0 {
			n := fmt.Sprintf("%s drilled; %s listed, not scored", plural(len(rows), "row"), plural(lookups, "read-only turn"))
			if lookups > len(rep.Listed) {
				n += fmt.Sprintf(" (the newest %d shown)", len(rep.Listed))
			}
			notes = append(notes, n)
		}
		if len(unvouched) > 0 {
			notes = append(notes, strings.TrimPrefix(unvouchedWords(req, unvouched), "; "))
		}
		rep.Note = strings.Join(notes, "; ")
	}
	lookup := time.Since(t.start)
	var vouched []*ledger.Row
	for _, row := range rows {
		if row.ReceiptVerified() {
			vouched = append(vouched, row)
		}
	}
	var answers []answer
	for _, row := range rows {
		rep.Rows = append(rep.Rows, row.ID)
		pulls, a, _ := r.drillRow(ctx, row, req.Principal, lookup, len(rows), vouched)
		if cut != "" {
			// A person decides once the rows left out are looked at: the
			// dispute may be about one of them.
			d := &pulls[len(pulls)-1]
			d.Passed, d.Detail = false, "needs a person: "+cut+"; on this row alone: "+d.Detail
		}
		rep.Pulls = append(rep.Pulls, pulls...)
		a.row, a.at = row.ID, row.IssuedAt
		answers = append(answers, a)
	}
	if cut != "" {
		more := plural(left, "more record")
		if left == 0 {
			more = "more records"
		}
		answers = append(answers, answer{finding: fmt.Sprintf("We hold %s about %s that this check did not cover.", more, describeQuery(req)),
			closing: "A member of our team will go through them and get back to you."})
	}
	switch n := lookups; {
	case n == 1:
		answers = append(answers, answer{finding: "Your agent also made one other request that ran no action: it only showed information and changed nothing."})
	case n > 1:
		answers = append(answers, answer{finding: fmt.Sprintf("Your agent also made %d other requests that ran no action: they only showed information and changed nothing.", n)})
	}
	rep.Reply = compose(answers)
}

// readOnly reports whether row is a read-only turn: a receipt whose class
// keeps no evidence. A look-up recorded INCIDENT or UNAUTHORIZED is in
// the incident or refused class, keeps its evidence, and is drilled.
func readOnly(row *ledger.Row) bool {
	return row.Kind == ledger.KindReceipt && row.Class == retention.ReadOnly
}

// rank orders the rows of a dispute drill for the cut at MaxRows: receipts
// whose signature verified first, each receipt's first row before the
// rows that repeat it (a writer may post a real receipt again, each time
// with other evidence beside it: every post is a row of its own, signed
// at the same time), in lookup order (newest first by their signed time);
// then every other row (a receipt no signature vouches for, a refusal)
// newest first by the time the ledger recorded it, since the time it
// claims is a writer's word: a writer cannot push a verified row out of
// the drill by posting rows dated later, or by posting it again.
func rank(rows []*ledger.Row) {
	slices.SortStableFunc(rows, func(a, b *ledger.Row) int {
		av, bv := a.ReceiptVerified(), b.ReceiptVerified()
		switch {
		case av && !bv:
			return -1
		case bv && !av:
			return 1
		case av:
			ad, bd := a.Verifier.DuplicateOf != "", b.Verifier.DuplicateOf != ""
			switch {
			case bd && !ad:
				return -1
			case ad && !bd:
				return 1
			}
			return 0
		}
		return b.RecordedAt.Compare(a.RecordedAt)
	})
}

// answer is one drilled row's part of the customer reply.
type answer struct {
	grant   string // the permission the customer gave (shared by rows under one grant)
	finding string // what the record shows
	closing string // what happens next
	// row is the drilled row the finding is about, and at the time the
	// finding gives for it (to the minute); "" for the reply's own
	// sentences (rows left out, look-ups).
	row string
	at  time.Time
}

// compose writes the customer reply in at most two short paragraphs: what
// the records show, then what happens next. A part holds no line break of
// its own: a control character that a writer's words brought into it (a
// tool or target stored before the ledger refused them) is written
// escaped (termtext.Escape), so that the reply's lines are its own.
//
// A grant or closing sentence said once already is not said again: the
// findings of the rows under one grant follow its sentence ("under that
// permission"), in the order of the rows, wherever the rows are in the
// drill. A finding is about its own row, and two rows are two records (a
// customer charged twice has two): the findings of rows that read alike
// give their times to the second when those differ, and any that still
// read alike under the same grant are said once with how many there are
// ("This is on record twice."). Rows under two grants are never counted
// together: each grant's sentence is followed by its own rows' findings.
// The reply's own sentences (rows left out, look-ups) come after the
// rows'.
func compose(answers []answer) string {
	answers = toTheSecond(answers)
	type said struct {
		s string
		n int // rows whose finding reads so
	}
	type block struct {
		grant    string
		own      bool // the reply's own sentences, about no one row
		findings []said
	}
	var blocks []*block
	var second []string
	for _, a := range answers {
		g, own := termtext.Escape(a.grant), a.row == "" && a.grant == ""
		i := slices.IndexFunc(blocks, func(b *block) bool { return b.grant == g && b.own == own })
		if i < 0 {
			blocks = append(blocks, &block{grant: g, own: own})
			i = len(blocks) - 1
		}
		b := blocks[i]
		if f := termtext.Escape(a.finding); f != "" {
			j := slices.IndexFunc(b.findings, func(x said) bool { return x.s == f })
			if j < 0 {
				b.findings = append(b.findings, said{s: f})
				j = len(b.findings) - 1
			}
			if a.row != "" {
				b.findings[j].n++
			}
		}
		if c := termtext.Escape(a.closing); c != "" && !slices.Contains(second, c) {
			second = append(second, c)
		}
	}
	var first []string
	for _, b := range blocks {
		if b.grant != "" {
			first = append(first, b.grant)
		}
		for _, f := range b.findings {
			switch {
			case f.n == 2:
				f.s += " This is on record twice."
			case f.n > 2:
				f.s += fmt.Sprintf(" This is on record %d times.", f.n)
			}
			first = append(first, f.s)
		}
	}
	reply := strings.Join(first, " ")
	if len(second) > 0 {
		reply += "\n\n" + strings.Join(second, " ")
	}
	return reply
}

// toTheSecond rewrites the findings of rows that read alike, where the
// rows' times differ within the minute the finding gives, with their
// times to the second (as clocks does for an action and a revocation).
func toTheSecond(answers []answer) []answer {
	alike := map[string][]int{}
	for i, a := range answers {
		if a.row != "" && a.finding != "" {
			alike[a.finding] = append(alike[a.finding], i)
		}
	}
	out := slices.Clone(answers)
	for _, idx := range alike {
		differ := false
		for _, i := range idx[1:] {
			differ = differ || !answers[i].at.Truncate(time.Second).Equal(answers[idx[0]].at.Truncate(time.Second))
		}
		if !differ {
			continue
		}
		for _, i := range idx {
			if at := answers[i].at; !at.IsZero() {
				out[i].finding = strings.Replace(answers[i].finding, clock(at), clockSecond(at), 1)
			}
		}
	}
	return out
}

// otherNamesRead bounds the rows otherNames reads.
const otherNamesRead = 1000

// otherNames says, for a lookup by target and principal that found
// nothing, what the ledger holds about the target under other principals:
// a refusal's principal is the name the writer claimed (a Provider files
// a request without a grant under "sub S of agent A"), so the customer's
// own attempts may be there. "" when it holds none, or the lookup was not
// by both.
func (r *Runner) otherNames(ctx context.Context, req Request) string {
	if req.Target == "" || req.Principal == "" {
		return ""
	}
	read := 0
	listed, next, err := r.l.List(ctx, ledger.Query{Target: req.Target, PageSize: 100, MaxRead: otherNamesRead, Read: &read})
	var found []*ledger.Row
	for _, row := range listed {
		if row.Principal != req.Principal {
			found = append(found, row)
		}
	}
	if err != nil || len(found) == 0 {
		return ""
	}
	refusals, names := 0, []string{}
	for _, row := range found {
		if row.Kind == ledger.KindRefusal {
			refusals++
		}
		if !slices.Contains(names, row.Principal) && len(names) < 3 {
			names = append(names, row.Principal)
		}
	}
	more := ""
	if next != "" {
		more = " or more"
	}
	return fmt.Sprintf("; the ledger holds %s%s about %s under other principals (%d of them refusals, whose principal is the name the writer claimed), such as %s: drill the order without the customer to see them",
		plural(len(found), "row"), more, req.Target, refusals, strings.Join(quoteAll(names), ", "))
}

// unvouchedWords names, for the support lead, the refusals a drill by
// customer alone found under the customer's name without drilling them:
// with no delegation token that verified, their customer is the name the
// writer claimed, so a drill of their order scores them.
func unvouchedWords(req Request, refusals []*ledger.Row) string {
	var ids, orders []string
	for _, row := range refusals {
		if len(ids) < 3 {
			ids = append(ids, short(row.ID))
		}
		for _, t := range row.Targets() {
			if !slices.Contains(orders, t) && len(orders) < 3 {
				orders = append(orders, t)
			}
		}
	}
	on := ""
	if len(orders) > 0 {
		on = " (of " + strings.Join(quoteAll(orders), ", ") + ")"
	}
	return fmt.Sprintf("; the ledger also holds %s%s under the name of %s that no signature ties to the customer (the name the writer claimed), such as %s, not drilled: drill their orders to score them",
		plural(len(refusals), "refusal"), on, describeQuery(req), strings.Join(ids, ", "))
}

// otherSpellingsRead bounds the rows otherSpellings reads for each
// spelling.
const otherSpellingsRead = 1000

// otherSpellings says, for a drill by target that found nothing, what
// the ledger holds under the target's id in upper or lower case: the
// lookup matches ids exactly, and a pipeline that changes an id's case
// files the action under an id the customer's does not find. Rows under
// other mixes of case are not looked for (the indexes are by exact id).
// A drill that names a customer looks for that customer's rows alone:
// A-5531 and a-5531 may be two orders, of two customers. "" when there
// are none.
func (r *Runner) otherSpellings(ctx context.Context, req Request) string {
	if req.Target == "" {
		return ""
	}
	var out []string
	for _, v := range []string{strings.ToUpper(req.Target), strings.ToLower(req.Target)} {
		if v == req.Target {
			continue
		}
		read := 0
		found, next, err := r.l.List(ctx, ledger.Query{Target: v, Principal: req.Principal, PageSize: 100, MaxRead: otherSpellingsRead, Read: &read})
		if err != nil || len(found) == 0 {
			continue
		}
		more := ""
		if next != "" {
			more = " or more"
		}
		ids := []string{}
		for _, row := range found[:min(len(found), 3)] {
			ids = append(ids, short(row.ID))
		}
		of := ""
		if req.Principal != "" {
			of = " for customer " + req.Principal
		}
		out = append(out, fmt.Sprintf("%s%s filed under %q%s, such as %s", plural(len(found), "row"), more, v, of, strings.Join(ids, ", ")))
	}
	if len(out) == 0 {
		return ""
	}
	return "; the ledger holds " + strings.Join(out, ", and ") + " (the id in another case): drill that id"
}

// quoteAll quotes each of ss as a Go string: names a writer chose are
// shown with their spaces and any characters that would mislead.
func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// describeQuery names what a drill by target or customer looked for:
// "A-5531", "A-5531 for customer acct-48213", "customer acct-48213".
func describeQuery(req Request) string {
	switch {
	case req.Target != "" && req.Principal != "":
		return req.Target + " for customer " + req.Principal
	case req.Target != "":
		return req.Target
	}
	return "customer " + req.Principal
}

func (r *Runner) monthly(ctx context.Context, rep *Report) {
	t := startTimer()
	pool, err := r.checkPool(ctx)
	switch {
	case err != nil:
		failAll(rep, t, "checking the drill pool failed: "+err.Error())
		return
	case len(pool.Missing) > 0:
		// Rows left out of the pool are never sampled: not a sample of
		// the eligible rows, and not "nothing to drill".
		failAll(rep, t, missingWords(pool))
		rep.Note = fmt.Sprintf("not drilled: the drill pool holds %s; it does not hold %s", plural(pool.Pool, "row"), missingCount(pool))
		return
	}
	rows, eligible, err := r.sample(ctx, rep.Request.Sample)
	switch {
	case err != nil:
		failAll(rep, t, "sampling failed: "+err.Error())
		return
	case eligible == 0:
		// Not a failure: a young ledger has nothing to drill yet.
		rep.Note = "nothing to drill: the ledger holds no eligible rows (receipts whose evidence is kept, not duplicates); read-only turns, refusals and receipts whose signature failed are never sampled; " + poolWords(pool)
		return
	case eligible <= rep.Request.Sample:
		rep.Note = fmt.Sprintf("the ledger holds %s, no more than the sample of %d: all drilled", plural(eligible, "eligible row"), rep.Request.Sample)
		if eligible == 1 {
			rep.Note = fmt.Sprintf("the ledger holds 1 eligible row, no more than the sample of %d: it was drilled", rep.Request.Sample)
		}
	default:
		rep.Note = fmt.Sprintf("%d of %d eligible rows drilled, picked uniformly at random", len(rows), eligible)
	}
	rep.Note += "; " + poolWords(pool)
	lookup := time.Since(t.start)
	var noArgs []string // rows that fail only because their receipt signs no args
	for _, row := range rows {
		rep.Rows = append(rep.Rows, row.ID)
		pulls, _, f := r.drillRow(ctx, row, "", lookup, len(rows), nil)
		rep.Pulls = append(rep.Pulls, pulls...)
		if f != nil && failsForNoArgs(f, pulls) {
			noArgs = append(noArgs, short(row.ID))
		}
	}
	if len(noArgs) > 0 {
		// One cause, said once: a Provider that signs no args hash (PACT
		// lets it leave argsHash out) fails every row that changed
		// something, every month, with nothing else wrong.
		rep.Note += fmt.Sprintf("; %s %s: the Provider signs no args, so nothing signed names what the action changed (rows %s; PACT lets a Provider leave argsHash out, and the order id is then the action log's word alone); the drill does not pass such a row while its Provider signs none",
			plural(len(noArgs), "row"), needWord(len(noArgs)), strings.Join(noArgs, ", "))
	}
}

// needWord is "needs a person" or "need a person", for n rows.
func needWord(n int) string {
	if n == 1 {
		return "needs a person"
	}
	return "need a person"
}

// failsForNoArgs reports whether a drilled row failed for one cause
// alone: its receipt signs no args for an action filed under a target, so
// nothing signed names the object the action changed. Every pull but
// action_log and decision passed, every action_log problem is such an
// action, and the decision is that nothing signed names the target.
func failsForNoArgs(f *facts, pulls []Pull) bool {
	if len(f.noArgs) == 0 || len(f.noArgs) != len(f.unsignedTargets) || !f.argsMatch {
		return false
	}
	for _, p := range pulls {
		switch p.Name {
		case PullActionLog:
		case PullDecision:
			if p.Passed || !strings.HasPrefix(p.Detail, unsignedDecision) {
				return false
			}
		default:
			if !p.Passed {
				return false
			}
		}
	}
	return true
}

// sample picks n of the rows the monthly drill may sample
// (ledger.Drillable: receipts whose signature did not fail and whose
// evidence is kept, not duplicates)
// uniformly at random, and counts them. Every eligible row has the same
// chance however many ineligible rows there are; the ledger draws from its
// drill pool without reading every row (ledger.SampleDrillPool).
func (r *Runner) sample(ctx context.Context, n int) ([]*ledger.Row, int, error) {
	return r.l.SampleDrillable(ctx, n, r.cfg.Rand)
}

// facts are what the pulls established, for the decision and the reply.
type facts struct {
	row         *ledger.Row
	ev          *ledger.EvidenceView
	token       *verifier.TokenClaims
	argsMatch   bool
	argsChecked bool
	// unsignedTargets are the row's actions ("tool target") whose target
	// nothing signed names: the receipt signs no args, the ledger computed
	// their hash (the agent did not sign them), or the signed args do not
	// name it. unsignedOn are those targets, each once.
	unsignedTargets []string
	unsignedOn      []string
	// noArgs are those of unsignedTargets whose receipt signs no args.
	noArgs     []string
	identity   bool
	reverified bool
	missing    []string    // evidence a person would have to find
	original   *ledger.Row // the earlier row a DUPLICATE row replays
	// originalSwept is the tombstone of that earlier row when retention
	// swept it (a row kept longer than the one it repeats, posted later).
	originalSwept *ledger.Tombstone
	copyOf        *ledger.Row            // a row drilled with this one whose signature vouches for the same receipt claims
	betterPost    *ledger.Row            // a later post of this row's receipt whose own checks all passed where this row's did not
	otherFiling   *ledger.Row            // a later post of this row's receipt filing its action under another target
	leafDiff      string                 // how the row differs from its leaf in the Merkle log; "" when it agrees or is not logged
	incident      *ledger.IncidentRecord // the row's incident, open or closed; nil when it names none
	// lateRevocation is the grant's revocation the ledger holds now, as of
	// a time before the action, recorded after the row was: the row's
	// write-time check passed and stands, and the record contradicts it.
	lateRevocation *ledger.Revocation
	// otherCustomer is the row's principal when it is not the customer
	// the drill was asked for (a drill by row with a principal).
	otherCustomer string
	// revocation is the grant's revocation the ledger holds now, whenever
	// it is dated; nil when it holds none.
	revocation *ledger.Revocation
}

// drillRow runs the six pulls on one row. lookup is the time the row lookup
// took, counted in receipt_row. vouched are the rows drilled with it whose
// receipt signature verified. It returns what the pulls established, nil
// for a refusal.
func (r *Runner) drillRow(ctx context.Context, row *ledger.Row, principal string, lookup time.Duration, found int, vouched []*ledger.Row) ([]Pull, answer, *facts) {
	f := &facts{row: row}
	if row.Kind == ledger.KindRefusal {
		pulls, a := r.drillRefusal(ctx, row, lookup, vouched)
		return pulls, a, nil
	}
	if !row.ReceiptVerified() {
		for _, v := range vouched {
			if v.ID != row.ID && v.SameReceipt(row) {
				f.copyOf = v
				break
			}
		}
	}
	var pulls []Pull
	add := func(p Pull) { pulls = append(pulls, p) }
	if row.Verifier.DuplicateOf != "" {
		// Found before the timers start: the lookup of the replayed row is
		// part of the receipt_row pull below.
		orig, err := r.l.Get(ctx, row.Verifier.DuplicateOf)
		var expired *ledger.ExpiredError
		switch {
		case err == nil:
			f.original = orig
		case errors.As(err, &expired):
			f.originalSwept = &expired.Tombstone
		}
	}

	// 1. receipt_row: the row, its receipt hash and the stored receipt bytes.
	t := startTimer()
	t.start = t.start.Add(-lookup)
	ev, err := r.l.Evidence(ctx, row.ID)
	switch {
	case err != nil:
		f.missing = append(f.missing, "the stored evidence")
		add(t.pull(row.ID, PullReceiptRow, false, "evidence of row %s unreadable: %v", short(row.ID), err))
	case row.KeepsNoEvidence():
		f.ev = ev
		f.missing = append(f.missing, "the receipt bytes, which this class does not keep")
		add(t.pull(row.ID, PullReceiptRow, false, "row %s: %s; only the receipt hash %s…, the verifier result (%s) and the scopes used (%s) are kept",
			short(row.ID), row.EvidenceNotKept, row.ReceiptID[:19], row.Status, strings.Join(row.ScopesUsed, " ")))
	case row.Kind != ledger.KindReceipt:
		f.ev = ev
		f.missing = append(f.missing, "a receipt")
		add(t.pull(row.ID, PullReceiptRow, false, "row %s is a %s without a receipt: %s", short(row.ID), kindWord(row), refusalReason(row)))
	case principal != "" && row.Principal != principal:
		f.ev, f.otherCustomer = ev, row.Principal
		add(t.pull(row.ID, PullReceiptRow, false, "row %s belongs to %s, not %s", short(row.ID), row.Principal, principal))
	case ev.Evidence.ReceiptJWS == "" || "sha256:"+sha256Hex(ev.Evidence.ReceiptJWS) != row.ReceiptID:
		f.ev = ev
		f.missing = append(f.missing, "the receipt bytes")
		add(t.pull(row.ID, PullReceiptRow, false, "row %s: the stored receipt does not hash to %s", short(row.ID), row.ReceiptID))
	default:
		f.ev = ev
		more := ""
		if found > 1 {
			more = fmt.Sprintf(" (one of %d rows drilled)", found)
		}
		add(t.pull(row.ID, PullReceiptRow, true, "row %s for %s, %s, %s at %s, receipt %s…%s", short(row.ID), targets(row), row.Principal, tools(row), clock(row.IssuedAt), row.ReceiptID[:19], more))
	}

	// 2. grant: the delegation token behind the action.
	t = startTimer()
	add(r.grant(ctx, t, f))

	// 3. action_log: the logged args against the receipt's args hash.
	t = startTimer()
	add(r.actionLog(t, f))

	// 4. agent_identity: the request JWT against the stored JWKS snapshot.
	t = startTimer()
	add(r.agentIdentity(ctx, t, f))

	// 5. reverify: VerifyRow on the stored bytes.
	t = startTimer()
	rv, err := r.l.VerifyRow(ctx, row.ID)
	switch {
	case err != nil:
		f.missing = append(f.missing, "a re-run of the verifier")
		add(t.pull(row.ID, PullReverify, false, "verify failed: %v", err))
	case !rv.Same:
		add(t.pull(row.ID, PullReverify, false, "the stored bytes no longer give the write-time result: %s", strings.Join(rv.Differences, "; ")))
	default:
		f.reverified = true
		add(t.pull(row.ID, PullReverify, true, "%d checks re-run on the stored bytes give the write-time result (%s)", len(rv.Checks), row.Status))
	}

	// 6. decision and reply.
	t = startTimer()
	switch idx, diff, err := r.l.RowLeafDiff(ctx, row.ID); {
	case err == nil && diff != "":
		// The row was rewritten in the row store after the log took it:
		// nothing it says now can be decided on.
		f.leafDiff = fmt.Sprintf("the row's record differs from its leaf %d in the Merkle log: %s", idx, diff)
		pulls[0].Passed = false
		pulls[0].Detail += "; " + f.leafDiff
	case err != nil && !leafNotExpected(err):
		// What the row says cannot be held against what the log took.
		f.missing = append(f.missing, "a comparison with its leaf in the Merkle log ("+err.Error()+")")
	}
	if row.IncidentID != "" {
		// Whether the incident is open or closed, for the reply.
		inc, err := r.l.IncidentRecord(ctx, row.IncidentID)
		if err != nil {
			f.missing = append(f.missing, "the incident "+row.IncidentID+" ("+err.Error()+")")
		}
		f.incident = inc
	}
	if row.ReceiptVerified() && row.Verifier.DuplicateOf == "" && (row.Status == ledger.Unauthorized || row.Status == ledger.Incident) {
		b, err := r.laterPost(ctx, row, func(o *ledger.Row) bool { return betterThanOriginal(o, row) })
		if err != nil {
			f.missing = append(f.missing, "the other posts of this receipt ("+err.Error()+")")
		}
		f.betterPost = b
	}
	if row.ReceiptVerified() && row.Verifier.DuplicateOf == "" && len(row.Targets()) > 0 {
		// The mirror of a duplicate filed under other targets, drilled
		// on the first post: found by its own order id, it must not be
		// decided (covered, an incident or unauthorized) while a later
		// post of its receipt files the action under another.
		o, err := r.laterPost(ctx, row, func(o *ledger.Row) bool { return row.SameReceipt(o) && otherTargets(o, row) })
		if err != nil {
			f.missing = append(f.missing, "the other posts of this receipt ("+err.Error()+")")
		}
		f.otherFiling = o
	}
	passed, detail, reply := decide(f, r.cfg.Names)
	add(t.pull(row.ID, PullDecision, passed, "%s", detail))
	return pulls, reply, f
}

func (r *Runner) grant(ctx context.Context, t timer, f *facts) Pull {
	row := f.row
	if f.ev == nil || f.ev.Evidence.DelegationToken == "" {
		f.missing = append(f.missing, "the delegation token")
		return t.pull(row.ID, PullGrant, false, "no delegation token is stored for this row")
	}
	var tok verifier.TokenClaims
	if _, err := verifier.DecodeClaims(f.ev.Evidence.DelegationToken, &tok); err != nil {
		f.missing = append(f.missing, "a readable delegation token")
		return t.pull(row.ID, PullGrant, false, "the stored delegation token cannot be read: %v", err)
	}
	f.token = &tok
	granted := tok.Scopes()
	var missing []string
	for _, s := range row.ScopesUsed {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	switch {
	case tok.Sub != row.Principal:
		return t.pull(row.ID, PullGrant, false, "the token's user is %q, not the principal %q", tok.Sub, row.Principal)
	case len(missing) > 0:
		return t.pull(row.ID, PullGrant, false, "the grant lacks %s, which the action used (granted: %s)", strings.Join(missing, " "), tok.Scope)
	case tok.Exp == nil || row.IssuedAt.After(tok.Exp.Time()):
		return t.pull(row.ID, PullGrant, false, "the token had expired at the action time %s", clock(row.IssuedAt))
	}
	summary := fmt.Sprintf("%s granted %s to %s at %s (grant %s; its delegation token expires %s); the action used %s",
		tok.Sub, tok.Scope, tok.ClientID, clock(grantTime(&tok)), tok.GrantID, clock(tok.Exp.Time()), strings.Join(row.ScopesUsed, " "))
	if row.GrantID == "" {
		return t.pull(row.ID, PullGrant, true, "%s", summary)
	}
	// The revocation on record now, which may have been reported after
	// the row was written.
	rev, err := r.l.Revocation(ctx, row.GrantID)
	switch {
	case err != nil:
		f.missing = append(f.missing, "the grant's revocation record ("+err.Error()+")")
		return t.pull(row.ID, PullGrant, false, "%s; whether grant %s was revoked cannot be read: %v", summary, row.GrantID, err)
	case rev == nil:
		return t.pull(row.ID, PullGrant, true, "%s", summary)
	case !ledger.IssuedAfterRevocation(row.IssuedAt, rev.RevokedAt):
		f.revocation = rev
		return t.pull(row.ID, PullGrant, true, "%s; the grant was revoked later, at %s", summary, rev.RevokedAt.UTC().Format(time.RFC3339))
	}
	f.revocation = rev
	revoked := fmt.Sprintf("grant %s was revoked at %s (reported by %s)", row.GrantID, rev.RevokedAt.UTC().Format(time.RFC3339), rev.By)
	if a := rev.AdminRevokedAt; !a.IsZero() && !a.Equal(rev.RevokedAt) {
		// Two times, two meanings (docs/design/038): the earliest
		// revocation is the one in force for the record; an admin's
		// stops the embedded Provider.
		revoked += fmt.Sprintf(", the time in force for the record (receipts under the grant after it are incidents); an admin revoked it at %s, from when the embedded Provider refuses the grant", a.UTC().Format(time.RFC3339))
	}
	if c, ok := checkOf(row, verifier.CheckGrantNotRevoked); ok && c.Result == verifier.Fail {
		return t.pull(row.ID, PullGrant, false, "%s; %s, before the action at %s", summary, revoked, clock(row.IssuedAt))
	}
	f.lateRevocation = rev
	return t.pull(row.ID, PullGrant, false, "%s; %s, before the action at %s, and recorded at %s, after this row was recorded at %s: the row's write-time check stands, and the record now contradicts it",
		summary, revoked, clock(row.IssuedAt), rev.RecordedAt.UTC().Format(time.RFC3339), row.RecordedAt.UTC().Format(time.RFC3339))
}

func grantTime(tok *verifier.TokenClaims) time.Time {
	if tok.Iat == nil {
		return time.Time{}
	}
	return tok.Iat.Time()
}

// unsigned records that nothing signed names the target of action a.
func (f *facts) unsigned(a verifier.RowAction) {
	f.unsignedTargets = append(f.unsignedTargets, a.Tool+" "+a.Target)
	if !slices.Contains(f.unsignedOn, a.Target) {
		f.unsignedOn = append(f.unsignedOn, a.Target)
	}
}

func (r *Runner) actionLog(t timer, f *facts) Pull {
	row := f.row
	if f.ev == nil {
		f.missing = append(f.missing, "the action log")
		return t.pull(row.ID, PullActionLog, false, "no action log entries are stored for this row")
	}
	logged := f.ev.Evidence.Actions
	used := make([]bool, len(logged))
	var ok, problems []string
	for _, a := range row.Actions {
		j := slices.IndexFunc(logged, func(l verifier.Action) bool { return l.Tool == a.Tool })
		for j >= 0 && used[j] {
			next := slices.IndexFunc(logged[j+1:], func(l verifier.Action) bool { return l.Tool == a.Tool })
			if next < 0 {
				j = -1
				break
			}
			j += 1 + next
		}
		if j < 0 {
			if a.ArgsHash != "" {
				problems = append(problems, fmt.Sprintf("%s: no action log entry", a.Tool))
			}
			continue
		}
		used[j] = true
		got := verifier.ArgsHash(logged[j].ArgsJSON)
		unsigned := a.Target != "" && a.TargetSource != verifier.TargetFromSignedArgs
		switch {
		case a.ArgsHash == "" && unsigned:
			// The receipt signs the tool and no args: nothing signed
			// names the object the row is filed under (docs/design/012).
			f.unsigned(a)
			f.noArgs = append(f.noArgs, a.Tool+" "+a.Target)
			problems = append(problems, fmt.Sprintf("%s %s: the receipt signs no args, so nothing signed names %s: the target is the action log's alone", a.Tool, a.Target, a.Target))
		case a.ArgsHash == "":
			ok = append(ok, fmt.Sprintf("%s %s: no args", a.Tool, logged[j].Target))
		case got != a.ArgsHash:
			problems = append(problems, fmt.Sprintf("%s %s: the logged args hash %s is not the receipt's %s", a.Tool, logged[j].Target, got, a.ArgsHash))
		case a.HashSource == verifier.HashComputedByLedger && unsigned:
			// The agent did not sign the args: they are the writer's,
			// and so is the target they name.
			f.unsigned(a)
			problems = append(problems, fmt.Sprintf("%s %s: args hash %s matches, but the ledger computed it (the agent did not sign args), so nothing signed names %s: the target is the action log's alone", a.Tool, a.Target, short(got), a.Target))
		case a.HashSource == verifier.HashComputedByLedger:
			ok = append(ok, fmt.Sprintf("%s %s: args hash %s matches (computed by the ledger; the agent did not sign args)", a.Tool, logged[j].Target, short(got)))
		case a.Target != "" && !namedBySignedArgs(a, logged[j].ArgsJSON):
			// The args are the signed ones, and they do not name the
			// object the row is filed under: the target is the writer's
			// word alone (docs/design/012).
			f.unsigned(a)
			problems = append(problems, fmt.Sprintf("%s %s: args hash %s matches the signed one, but the signed args %s do not name %s: the target is the action log's alone",
				a.Tool, a.Target, short(got), clipped(logged[j].ArgsJSON, 200), a.Target))
		default:
			ok = append(ok, fmt.Sprintf("%s %s: args hash %s matches the signed one", a.Tool, logged[j].Target, short(got)))
		}
	}
	for j, l := range logged {
		if !used[j] {
			problems = append(problems, fmt.Sprintf("logged %s %s is not in the receipt", l.Tool, l.Target))
		}
	}
	f.argsChecked = true
	if len(problems) > len(f.unsignedTargets) {
		return t.pull(row.ID, PullActionLog, false, "%s", strings.Join(problems, "; "))
	}
	f.argsMatch = true
	if len(problems) > 0 {
		return t.pull(row.ID, PullActionLog, false, "%s", strings.Join(problems, "; "))
	}
	if len(ok) == 0 {
		return t.pull(row.ID, PullActionLog, true, "the receipt lists no actions with args")
	}
	return t.pull(row.ID, PullActionLog, true, "%s", strings.Join(ok, "; "))
}

func (r *Runner) agentIdentity(ctx context.Context, t timer, f *facts) Pull {
	row := f.row
	if f.ev == nil || f.ev.Evidence.RequestJWT == "" {
		f.missing = append(f.missing, "the request JWT")
		return t.pull(row.ID, PullAgentIdentity, false, "no request JWT is stored for this row")
	}
	if row.Agent.JWKSSnapshot == "" {
		f.missing = append(f.missing, "the agent's JWKS snapshot")
		return t.pull(row.ID, PullAgentIdentity, false, "no JWKS snapshot of %s was taken at write time", row.Agent.Platform)
	}
	snap, _, err := r.l.Snapshot(ctx, row.Agent.JWKSSnapshot)
	if err != nil {
		f.missing = append(f.missing, "the agent's JWKS snapshot")
		return t.pull(row.ID, PullAgentIdentity, false, "JWKS snapshot %s: %v", short(row.Agent.JWKSSnapshot), err)
	}
	ks, err := verifier.ParseKeySet(snap)
	if err != nil {
		return t.pull(row.ID, PullAgentIdentity, false, "JWKS snapshot %s: %v", short(snap.ID), err)
	}
	kid, alg, err := verifier.VerifySignature(f.ev.Evidence.RequestJWT, ks)
	if err != nil {
		return t.pull(row.ID, PullAgentIdentity, false, "request JWT against snapshot %s: %v", short(snap.ID), err)
	}
	f.identity = true
	return t.pull(row.ID, PullAgentIdentity, true, "request JWT kid %s found in the JWKS snapshot %s of %s (fetched %s from %s); the %s signature verifies",
		kid, short(snap.ID), row.Agent.Platform, clock(snap.FetchedAt), snap.URI, alg)
}

// refusedClosing ends the reply on a refusal: the refused request, not
// any permission the customer gave, is what does not count.
const refusedClosing = "A refused request does not count as your approval; if anything was changed without your approval, we will put it right."

// drillRefusal answers the six pulls for a refusal row from the row alone:
// no receipt was presented, so the playbook's rule 1 decides (no verifiable
// receipt: unauthorized). vouched are the rows drilled with it whose
// receipt signature verified: a refusal of the action one of them records,
// in the same minute (servedBeside), needs a person.
func (r *Runner) drillRefusal(ctx context.Context, row *ledger.Row, lookup time.Duration, vouched []*ledger.Row) ([]Pull, answer) {
	var pulls []Pull
	add := func(p Pull) { pulls = append(pulls, p) }
	what := fmt.Sprintf("%s on %s at %s", tools(row), targets(row), clock(row.IssuedAt))
	claimed := "no one"
	if row.Refusal != nil && row.Refusal.ClaimedPrincipal != "" {
		claimed = row.Refusal.ClaimedPrincipal
	}
	agent := row.Agent.Platform
	if agent == "" {
		agent = "an unnamed agent"
	}
	t := startTimer()
	t.start = t.start.Add(-lookup)
	add(t.pull(row.ID, PullReceiptRow, true, "row %s is a refusal recorded %s: no receipt was presented (%s)", short(row.ID), clock(row.RecordedAt), refusalReason(row)))
	// A refusal posted with a delegation token that verified is under
	// that token's grant (ledger.Row.TokenVouches): the Brand's signature
	// names the grant and its user, and a revocation before it is the
	// agent acting after it.
	revoked, underGrant := verifier.Check{}, row.TokenVouches()
	if c, ok := checkOf(row, verifier.CheckGrantNotRevoked); underGrant && ok && c.Result == verifier.Fail {
		revoked = c
	}
	t = startTimer()
	if underGrant {
		detail := fmt.Sprintf("the refused request carried a delegation token of grant %s, for %s with %s, which the brand's signature vouches for (%s)",
			row.GrantID, row.Principal, strings.Join(row.ScopeGranted, " "), checkDetail(row, verifier.CheckDelegationToken))
		if revoked.Name != "" {
			detail += "; " + revoked.Detail
		}
		add(t.pull(row.ID, PullGrant, true, "%s", detail))
	} else {
		add(t.pull(row.ID, PullGrant, true, "no grant was presented: the refusal names %s as the customer, a claim no signature vouches for", claimed))
	}
	t = startTimer()
	add(t.pull(row.ID, PullActionLog, true, "the refused action: %s; it was not taken under any receipt", what))
	t = startTimer()
	// The agent's own act only with its signature on the request, bound
	// to the token (docs/design/035): any writer that has seen a token
	// can post a refusal under it.
	reqSig, signed := checkOf(row, verifier.CheckRequestSignature)
	signed = signed && reqSig.Result == verifier.Pass
	if b, ok := checkOf(row, verifier.CheckBindings); !ok || b.Result != verifier.Pass {
		signed = false
	}
	if underGrant && signed {
		add(t.pull(row.ID, PullAgentIdentity, true, "the refused request was signed by %s itself (%s); without a receipt no agent identity counts as approval", agent, reqSig.Detail))
	} else {
		add(t.pull(row.ID, PullAgentIdentity, true, "claimed by %s; without a receipt no agent identity counts as approval", agent))
	}
	t = startTimer()
	rv, err := r.l.VerifyRow(ctx, row.ID)
	switch {
	case err != nil:
		add(t.pull(row.ID, PullReverify, false, "verify failed: %v", err))
	case !rv.Same:
		add(t.pull(row.ID, PullReverify, false, "the stored refusal no longer gives the write-time result: %s", strings.Join(rv.Differences, "; ")))
	default:
		add(t.pull(row.ID, PullReverify, true, "the stored refusal record gives the write-time result (%s)", row.Status))
	}
	t = startTimer()
	idx, diff, err := r.l.RowLeafDiff(ctx, row.ID)
	if err != nil && !leafNotExpected(err) {
		add(t.pull(row.ID, PullDecision, false, "needs a person: the refusal cannot be compared with its leaf in the Merkle log: %v", err))
		return pulls, answer{finding: fmt.Sprintf("We are checking the record of %s.", r.cfg.Names.action(row.Brand, toolList(row), targets(row))+" at "+clock(row.IssuedAt)),
			closing: "A member of our team will get back to you."}
	}
	if err == nil && diff != "" {
		d := fmt.Sprintf("the row's record differs from its leaf %d in the Merkle log: %s", idx, diff)
		pulls[0].Passed = false
		pulls[0].Detail += "; " + d
		add(t.pull(row.ID, PullDecision, false, "needs a person: %s", d))
		return pulls, answer{finding: fmt.Sprintf("We are checking the record of %s.", r.cfg.Names.action(row.Brand, toolList(row), targets(row))+" at "+clock(row.IssuedAt)),
			closing: "A member of our team will get back to you."}
	}
	// A request the agent itself signed, bound to a token that verified
	// and lacks a scope the receipt used, is the agent asking twice (a
	// step-up: refused for the missing scope, granted, sent again and
	// served within the minute): a fact, no contradiction. The receipt's
	// own request and token, posted again as a refusal, are no step-up.
	stepUp := func(v *ledger.Row) bool {
		return underGrant && signed && slices.ContainsFunc(v.ScopesUsed, func(sc string) bool { return !slices.Contains(row.ScopeGranted, sc) })
	}
	if v := servedBeside(row, vouched); v != nil && !stepUp(v) {
		// The reply gives times to the minute: it would tell the customer
		// the action both ran and was refused. The Provider signed that it
		// served it; the refusal's time (and, unless a token vouches for
		// them, its customer and agent) is the writer's word.
		claims := "a refusal's customer, agent and time are the writer's claims"
		if underGrant {
			claims = "a refusal's time is the writer's claim"
		}
		add(t.pull(row.ID, PullDecision, false, "needs a person: a refusal of %s on %s at %s beside row %s, a verified receipt (%s) of the same action in the same minute; %s, and the record cannot show the agent asked twice",
			tools(row), targets(row), clock(row.IssuedAt), v.ID, strings.ToLower(v.Status.String()), claims))
		return pulls, answer{finding: fmt.Sprintf("We are checking the record of %s.", r.cfg.Names.action(row.Brand, toolList(row), targets(row))+" at "+clock(row.IssuedAt)),
			closing: "A member of our team will get back to you."}
	}
	if revoked.Name != "" {
		// The playbook's signal: an agent acting after a revocation.
		when, asked := "", clock(row.IssuedAt)
		if at, ok := revokedAt(revoked.Detail); ok {
			var on string
			asked, on = clocks(row.IssuedAt, at)
			when = " (on " + on + ")"
		}
		action := r.cfg.Names.action(row.Brand, toolList(row), targets(row)) + " at " + asked
		closing := refusedClosing
		if !signed {
			how := "no request JWT was posted"
			if reqSig.Name != "" {
				how = "request_signature " + reqSig.Result.String() + ": " + reqSig.Detail
			}
			add(t.pull(row.ID, PullDecision, true, "no verifiable receipt (rule 1): unauthorized; a request under grant %s after it was revoked was refused, with no signature of the agent's bound to it (%s): the record does not show the agent made it; the control held and the refusal is on record", row.GrantID, how))
			return pulls, answer{
				finding: fmt.Sprintf("A request for %s, under a permission that had been revoked%s, was refused: it is on record as refused.", action, when),
				closing: closing,
			}
		}
		add(t.pull(row.ID, PullDecision, true, "no verifiable receipt (rule 1): unauthorized; the agent used grant %s after it was revoked, the control held and the refusal is on record", row.GrantID))
		return pulls, answer{
			finding: fmt.Sprintf("Your agent asked for %s after its permission had been revoked%s, and we refused it: the request is on record as refused.", action, when),
			closing: closing,
		}
	}
	add(t.pull(row.ID, PullDecision, true, "no verifiable receipt (rule 1): unauthorized; the control held and the refusal is on record"))
	return pulls, answer{
		finding: fmt.Sprintf("We have no verifiable approval from you on file for %s: the request was refused, and is on record as refused.", r.cfg.Names.action(row.Brand, toolList(row), targets(row))+" at "+clock(row.IssuedAt)),
		closing: refusedClosing,
	}
}

// servedBeside returns the first of vouched (rows whose receipt signature
// verified, whatever their status: the Provider signed that it served the
// turn) that records refusal's action (its tool on its target) in the
// same UTC minute, or less than a minute apart, for whichever principal (a drill of an order alone
// answers the customer of both, and a refusal's principal is a claim
// unless a token vouches for it); nil when none does. A step-up
// (refused for a missing scope, granted, sent again and served) minutes
// apart is not one; within the minute, drillRefusal lets one through
// whose refused request the agent signed itself, bound to a token that
// verified and lacks a scope the receipt used: the record shows the
// agent asked twice.
func servedBeside(refusal *ledger.Row, vouched []*ledger.Row) *ledger.Row {
	minute := refusal.IssuedAt.UTC().Truncate(time.Minute)
	for _, v := range vouched {
		// The same minute as the reply prints it, or less than a minute
		// apart across its turn (13:12:59 beside 13:13:01).
		if d := v.IssuedAt.Sub(refusal.IssuedAt); !v.IssuedAt.UTC().Truncate(time.Minute).Equal(minute) && (d >= time.Minute || d <= -time.Minute) {
			continue
		}
		for _, a := range v.Actions {
			for _, ra := range refusal.Actions {
				if a.Tool == ra.Tool && a.Target == ra.Target {
					return v
				}
			}
		}
	}
	return nil
}

// decide turns the pulls into the decision and the customer's part of
// the reply, in the brand's words where names has them.
func decide(f *facts, names Names) (passed bool, detail string, reply answer) {
	row := f.row
	what := names.action(row.Brand, toolList(row), targets(row)) + " at " + clock(row.IssuedAt)
	if !targetsSigned(f) {
		// The reply never says the action was on an object nothing
		// signed names: only that its record was filed under it.
		what = fmt.Sprintf("%s at %s that was filed under %s", names.tools(row.Brand, toolList(row)), clock(row.IssuedAt), targets(row))
	}
	checking := answer{finding: fmt.Sprintf("We are checking the record of %s.", what), closing: "A member of our team will get back to you."}
	if f.leafDiff != "" {
		return false, "needs a person: " + f.leafDiff, checking
	}
	if f.otherCustomer != "" {
		// Nothing of another customer's row answers this customer: not
		// its grant, not its status.
		return false, fmt.Sprintf("needs a person: row %s belongs to %s, not the customer the drill was asked for", short(row.ID), f.otherCustomer), checking
	}
	// A row whose receipt signature failed is never the original of
	// another (docs/design/012): a DUPLICATE of one is decided on itself,
	// below, like any row. So is a DUPLICATE of the same receipt whose
	// own checks all passed, where the earlier post of it was recorded
	// UNAUTHORIZED: that post's other evidence (a request JWT, a token)
	// did not verify, and a writer posting the real receipt first with
	// made-up evidence must not make the real record a replay of it.
	if of := row.Verifier.DuplicateOf; of != "" && f.original != nil && f.original.Status == ledger.Incident && betterThanOriginal(row, f.original) {
		// The same signed turn, posted first with other evidence a writer
		// supplies (an action log, limits, a token) that made it an
		// incident, and again with evidence that passes every check: one
		// of the two was made up, and the record cannot tell which.
		return false, fmt.Sprintf("needs a person: row %s recorded this same signed receipt as an incident (%s) on other evidence posted with it (action log, limits or token), where this post's evidence passes every check; one of the two was not the application's, and the record cannot tell which", of, f.original.IncidentID), checking
	}
	// A DUPLICATE of the same receipt whose first row (the row named by
	// the receipt's hash) was swept by retention, and whose own checks all
	// passed, is what the record keeps of the turn: it is decided on
	// itself, below. One whose own evidence failed (a writer's replay
	// with a made-up token, kept longer than the real row) decides
	// nothing about the turn: the swept row did.
	sameReceipt := row.Verifier.DuplicateOf == strings.TrimPrefix(row.ReceiptID, "sha256:")
	sweptFirst := f.originalSwept != nil && sameReceipt && passedAllButDuplicate(row)
	if of := row.Verifier.DuplicateOf; of != "" && !sweptFirst && (f.original == nil || f.original.ReceiptVerified()) && !betterThanOriginal(row, f.original) {
		unfiled := ""
		if f.original != nil {
			unfiled = strings.Join(unfiledTargets(f.original, row), ", ")
		}
		switch {
		case f.original == nil && f.originalSwept != nil && sameReceipt:
			return false, fmt.Sprintf("needs a person: this row repeats the receipt of row %s, which retention swept on %s (it was %s), with evidence of its own that does not pass; the record of the turn was that row", of, f.originalSwept.SweptAt.UTC().Format("2006-01-02"), strings.ToLower(f.originalSwept.Status.String())), checking
		case f.original == nil && f.originalSwept != nil:
			return false, fmt.Sprintf("needs a person: the row this one duplicates (%s) used the same request JWT and was swept by retention, so whether it repeats that row's receipt cannot be shown", of), checking
		case f.original == nil:
			return false, fmt.Sprintf("needs a person: the row this one duplicates (%s) cannot be read, so whether it repeats that row's receipt cannot be shown", of), checking
		case !row.SameReceipt(f.original):
			// API.md: a request JWT reused for a different receipt is a
			// duplicate too. The Provider signed a second turn on one
			// signed request: PACT §3.2 lets an agent reuse its JWT
			// within its lifetime, and lets a Provider not track replay,
			// so the record cannot tell the agent's reuse from someone
			// replaying its JWT. It is no replay of the earlier row.
			return false, fmt.Sprintf("needs a person: row %s used the same request JWT for another receipt; this row is a second turn served on one signed request (the agent reusing its JWT within its lifetime, or someone replaying it), not a replay of that row", of), checking
		case unfiled != "":
			// The earlier post files the action under none of the
			// targets this one names: a lookup by them finds this post
			// alone, and deciding it as a replay would leave the
			// record of the turn, the earlier row, undrilled. A writer
			// posting the real receipt first with its action log's
			// targets left out gets that far.
			return false, fmt.Sprintf("needs a person: row %s recorded this same signed receipt first without filing it under %s, so a lookup by %s finds this post alone; the record of the turn is row %s (%s): drill it by its id",
				of, unfiled, unfiled, short(of), strings.ToLower(f.original.Status.String())), checking
		case otherTargets(row, f.original):
			// One signed turn, posted twice with action logs that file it
			// under different objects: a writer key posts the action log
			// (docs/design/012), so one of the two is not the
			// application's, and the receipt does not say which.
			return false, fmt.Sprintf("needs a person: row %s recorded this same signed receipt with another action log (%s, where this post names %s); one of the two was not the application's, and %s",
				of, strings.Join(actionTargets(f.original), ", "), strings.Join(actionTargets(row), ", "), whichFiling(f.original, row, "row "+short(of), "this post")), checking
		}
		// A replay is never a second authorization, whatever else the
		// pulls found: the decision belongs to the row it replays.
		first := fmt.Sprintf("the record made %s (%s)", clock(f.original.RecordedAt), strings.ToLower(f.original.Status.String()))
		return true, fmt.Sprintf("replay of row %s: not a second authorization; decide the dispute on that row", of),
			answer{finding: fmt.Sprintf("The record of %s repeats %s of the same signed request: it is not a second approval and counts once.", what, first)}
	}
	if c := f.copyOf; c != nil {
		// The same claims under a signature that does not verify, beside
		// the row whose signature vouches for them: no action of its own.
		return true, fmt.Sprintf("copy of row %s's receipt under a receipt signature that does not verify: no approval and no second action; decide the dispute on row %s", c.ID, c.ID),
			answer{finding: fmt.Sprintf("A copy of the record of %s that was not validly signed was also received; it does not count.", what)}
	}
	if o := f.otherFiling; o != nil {
		return false, fmt.Sprintf("needs a person: row %s posted this same signed receipt again with another action log (%s, where this row names %s); one of the two was not the application's, and %s",
			o.ID, strings.Join(actionTargets(o), ", "), strings.Join(actionTargets(row), ", "), whichFiling(o, row, "row "+short(o.ID), "this row")), checking
	}
	if b := f.betterPost; b != nil {
		// The mirror of the case above, drilled on the first post.
		return false, fmt.Sprintf("needs a person: row %s posted this same signed receipt again with evidence that passes every check, where this row's (%s) did not; one of the two was not the application's, and the record cannot tell which", b.ID, strings.ToLower(row.Status.String())), checking
	}
	if row.Status == ledger.Unauthorized && !row.ReceiptVerified() {
		// Rule 1 decides, whatever evidence is missing: a writer that
		// sends less (no request JWT) does not make the row need a
		// person. A receipt whose signature verified is the Provider's
		// record of a turn: what is missing beside it needs a person.
		return true, "no verifiable receipt: the ledger cannot show the customer approved this; treat it as unauthorized",
			answer{finding: fmt.Sprintf("We have no verifiable approval on file for %s.", what), closing: "We are treating it as unauthorized and will put it right."}
	}
	if len(f.unsignedTargets) > 0 {
		// What the customer approved is in the signed args; the order id
		// the row is filed under is the application's word, and a writer
		// key may post any (docs/design/012): whether the action was
		// covered, an incident or unauthorized, it was not shown to be
		// this order's.
		// The reply does not say the action was on the target either:
		// only that a record filed under it is being checked.
		on := make([]string, len(f.unsignedOn))
		for i, t := range f.unsignedOn {
			on[i] = asName(t)
		}
		return false, fmt.Sprintf(unsignedDecision+"%s (the receipt signs no args, the agent did not sign them, or the signed args do not name it); the row's target comes from the action log alone, so which object the action changed is for a person to check in the application's records",
				strings.Join(f.unsignedTargets, ", ")),
			answer{finding: fmt.Sprintf("We are checking a record of %s at %s that was filed under %s, which the signed request does not name.",
				names.tools(row.Brand, toolList(row)), clock(row.IssuedAt), strings.Join(on, ", ")), closing: checking.closing}
	}
	if len(f.missing) > 0 {
		return false, "needs a person: missing " + strings.Join(dedup(f.missing), ", "), checking
	}
	switch {
	case row.Status == ledger.Incident || (f.argsChecked && !f.argsMatch):
		found, why := incidentCauses(f, names)
		inc, closing := "", "This is our error, not yours; we will put it right."
		switch i := f.incident; {
		case i == nil:
			// Rows that flip without an incident of their own: the
			// action log read again does not match the receipt.
		case i.Open():
			inc = " (" + i.ID + ", open)"
			closing = fmt.Sprintf("This is our error, not yours; we have opened an incident (%s) and will put it right.", i.ID)
		default:
			// The closing note is the business's own record, for the
			// support lead: the reply says when, not what it says.
			inc = fmt.Sprintf(" (%s, opened %s, closed %s by %s", i.ID, clock(i.OpenedAt), clock(i.ClosedAt), i.ClosedBy)
			if i.Note != "" {
				inc += ": " + i.Note
			}
			inc += ")"
			closing = fmt.Sprintf("This is our error, not yours: we opened an incident (%s) for it on %s and closed it on %s. If anything is still not right, tell us and we will put it right.",
				i.ID, clock(i.OpenedAt), clock(i.ClosedAt))
		}
		return true, "the dispute flips: " + strings.Join(found, "; ") + "; this is the business's incident" + inc,
			answer{finding: fmt.Sprintf("You are right to question %s: %s.", what, why), closing: closing}
	case row.Status == ledger.Unauthorized || !f.identity:
		return true, "no verifiable receipt: the ledger cannot show the customer approved this; treat it as unauthorized",
			answer{finding: fmt.Sprintf("We have no verifiable approval on file for %s.", what), closing: "We are treating it as unauthorized and will put it right."}
	case !f.reverified || f.token == nil:
		return false, "needs a person: the verifier result could not be reproduced", checking
	case f.lateRevocation != nil:
		// Rows keep their write-time check (a writer key may revoke any
		// grant as of any time: docs/design/012), so the row does not
		// flip; nor can the reply say the grant covered the action.
		rev := f.lateRevocation
		return false, fmt.Sprintf("needs a person: grant %s's revocation as of %s, before the action, was reported by %s at %s, after the row was recorded; whether the grant still held at the action time is for a person to decide",
			row.GrantID, rev.RevokedAt.UTC().Format(time.RFC3339), rev.By, rev.RecordedAt.UTC().Format(time.RFC3339)), checking
	}
	tok := f.token
	agent := names.agent(tok.ClientID)
	return true, "the customer's grant covers the action: resolve as customer-authorized and point them to their agent platform",
		answer{
			grant: fmt.Sprintf("On %s you signed in with %s and allowed %s to %s.", clock(grantTime(tok)), names.brand(row.Brand), agent, names.scopes(row.Brand, tok.Scopes())),
			finding: fmt.Sprintf("At %s your agent, under that permission, ran %s, with a request signed by %s.",
				clock(row.IssuedAt), names.action(row.Brand, toolList(row), targets(row)), names.agent(row.Agent.Platform)),
			closing: fmt.Sprintf("%s decided to take this action for you; for why, please contact them. %s", agent, withdraw(f.revocation)),
		}
}

// unsignedDecision begins the decision on a row whose target nothing
// signed names.
const unsignedDecision = "needs a person: nothing signed names the target of "

// targetsSigned reports whether the signed args name the target of every
// action of f's row that has one: as the write path recorded it, or, for
// a row written before it recorded this, as the action_log pull read the
// signed args.
func targetsSigned(f *facts) bool {
	for _, a := range f.row.Actions {
		switch {
		case a.Target == "" || a.TargetSource == verifier.TargetFromSignedArgs:
		case a.TargetSource == verifier.TargetNotRecorded && a.ArgsHash != "" && f.argsChecked && f.argsMatch && !slices.Contains(f.unsignedOn, a.Target):
		default:
			return false
		}
	}
	return true
}

// withdraw is the reply's last word on the permission: that the customer
// can withdraw it, or when the record shows it ended.
//
// A revocation on record is not always the customer's: the Provider
// revokes a grant a newer grant of the same agent replaces (its note
// begins "replaced by grant"), and any writer key may record one. So the
// reply says what the record shows, not who did it.
func withdraw(rev *ledger.Revocation) string {
	switch {
	case rev == nil:
		return "You can withdraw the permission at any time."
	case strings.HasPrefix(rev.Note, "replaced by grant "):
		return fmt.Sprintf("On %s this permission was replaced by a newer one you gave the same agent; you can withdraw that at any time.", clock(rev.RevokedAt))
	}
	return fmt.Sprintf("Our record shows this permission ended on %s. You can check the permissions your agent holds on your account page.", clock(rev.RevokedAt))
}

// incidentCauses says why row f.row flips the dispute, from the checks
// the ledger recorded failed at write time (the ones that make a row an
// INCIDENT: ledger's rule 2) and the drill's own action_log pull: found
// for the decision, in the record's terms, and why for the customer, in
// plain words. Each cause is said only when the record shows it.
func incidentCauses(f *facts, names Names) (found []string, why string) {
	row := f.row
	var plain []string
	args := false
	for _, c := range row.Verifier.Checks {
		if c.Result != verifier.Fail {
			continue
		}
		switch c.Name {
		case verifier.CheckScopesWithin:
			granted := row.ScopeGranted
			if f.token != nil {
				granted = f.token.Scopes() // the stored delegation token's
			}
			beyond := scopesBeyond(row.ScopesUsed, granted)
			switch len(beyond) {
			case 0:
				plain = append(plain, "it used permissions beyond those you granted")
			case 1:
				plain = append(plain, fmt.Sprintf("it used a permission you had not granted (%s)", names.scopes(row.Brand, beyond)))
			default:
				plain = append(plain, fmt.Sprintf("it used permissions you had not granted (%s)", names.scopes(row.Brand, beyond)))
			}
		case verifier.CheckArgsHash:
			args = true
			plain = append(plain, "the action our log shows ran is not the action that was signed")
		case verifier.CheckWithinLimits:
			plain = append(plain, limitsExceeded(row, c.Detail)...)
		case verifier.CheckGrantNotRevoked:
			s := "it was taken after the permission you gave had been revoked"
			if at, ok := revokedAt(c.Detail); ok {
				on, taken := clocks(at, row.IssuedAt)
				if on == clock(at) {
					s += " (on " + on + ")"
				} else {
					// Within one minute: both to the second.
					s += " (on " + on + "; it was taken at " + taken + ")"
				}
			}
			plain = append(plain, s)
		default:
			continue
		}
		found = append(found, c.Name+" failed at write time ("+c.Detail+")")
	}
	if f.argsChecked && !f.argsMatch && !args {
		// The stored action log, read again now, does not match what the
		// receipt signs, though the write-time check did not say so.
		found = append(found, "the action_log pull found the logged actions do not match the receipt")
		plain = append(plain, "the action our log shows ran is not the action that was signed")
	}
	if len(plain) == 0 {
		// An INCIDENT whose record names no check of rule 2 that failed
		// (recorded by another version): say no more than that.
		found = append(found, "the row is recorded as an incident, and no failed check of rule 2 is recorded with it")
		plain = append(plain, "our checks recorded a problem with it")
	}
	return found, joinWords(plain)
}

// scopesBeyond lists the scopes used that granted does not hold; none
// when nothing granted is known, rather than every scope used.
func scopesBeyond(used, granted []string) []string {
	if len(granted) == 0 {
		return nil
	}
	var out []string
	for _, s := range used {
		if !slices.Contains(granted, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// limitsExceeded says which of the writer's limits a within_limits check
// that failed found exceeded, from its detail (ledger's withinLimits:
// "TOOL: N under grant G, countMax M" and "TOOL: amount X over amountMax
// Y") and the row's limits.
func limitsExceeded(row *ledger.Row, detail string) []string {
	var out []string
	if strings.Contains(detail, ", countMax ") {
		s := "it was done more times than the limit set for it allows"
		if row.Limits.CountMax > 0 {
			s += fmt.Sprintf(" (at most %d)", row.Limits.CountMax)
		}
		out = append(out, s)
	}
	if strings.Contains(detail, " over amountMax ") {
		s := "it was for an amount over the limit set for it"
		if row.Limits.AmountMax != "" {
			s += " (at most " + row.Limits.AmountMax + ")"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		out = append(out, "it went beyond the limits set for it")
	}
	return out
}

// revokedAt reads the revocation time from a grant_not_revoked check that
// failed (ledger's grantCheck: "grant revoked at RFC3339 (reported by …)").
func revokedAt(detail string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(detail, "grant revoked at ")
	if !ok {
		return time.Time{}, false
	}
	stamp, _, _ := strings.Cut(rest, " ")
	at, err := time.Parse(time.RFC3339, stamp)
	return at, err == nil
}

// joinWords joins clauses as a sentence does: "a", "a, and b", "a, b,
// and c".
func joinWords(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + ", and " + s[len(s)-1]
}

// leafNotExpected reports whether err, from Ledger.RowLeafDiff, says the
// row has no leaf to compare with: the ledger keeps no log, or the row is
// not yet in a signed checkpoint (or was recorded before the log).
func leafNotExpected(err error) bool {
	return errors.Is(err, ledger.ErrNoLog) || errors.Is(err, ledger.ErrNotLogged)
}

// passedAllButDuplicate reports whether row's receipt signature verified
// and every check of its own but the duplicate check passed or was
// skipped: the row would have been the turn's record had it come first.
func passedAllButDuplicate(row *ledger.Row) bool {
	if !row.ReceiptVerified() {
		return false
	}
	for _, c := range row.Verifier.Checks {
		if c.Name != verifier.CheckDuplicate && c.Result == verifier.Fail {
			return false
		}
	}
	return true
}

// betterThanOriginal reports whether row, a DUPLICATE of the same
// receipt as original, passed every check of its own where original,
// whose receipt signature verified too, was recorded UNAUTHORIZED or
// INCIDENT.
func betterThanOriginal(row, original *ledger.Row) bool {
	if original == nil || (original.Status != ledger.Unauthorized && original.Status != ledger.Incident) ||
		!original.ReceiptVerified() || !row.SameReceipt(original) {
		return false
	}
	return passedAllButDuplicate(row)
}

// laterPost finds a later post of row's receipt (a DUPLICATE naming row)
// that match accepts. The posts of one receipt share its signed grant and
// time, so they are read from the grant's rows at that time, maxScanned
// of them at most. row's receipt signature verified, so the same
// receipt's did on every later post: only the grant's rows a receipt
// signature vouches for are read (ledger.Query.Signed), and rows a writer
// forged under the grant at that time, any number of them, are not.
func (r *Runner) laterPost(ctx context.Context, row *ledger.Row, match func(*ledger.Row) bool) (*ledger.Row, error) {
	q := ledger.Query{GrantID: row.GrantID, Signed: true, Since: row.IssuedAt, PageSize: 1000}
	if until := row.IssuedAt.Add(time.Nanosecond); until.Before(maxNanos) {
		// Past 2262 times share one index key: no upper bound there.
		q.Until = until
	}
	scanned := 0 // rows read
	q.Read = &scanned
	for {
		q.MaxRead = maxScanned - scanned
		found, next, err := r.l.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, o := range found {
			if o.Verifier.DuplicateOf == row.ID && match(o) {
				return o, nil
			}
		}
		if next == "" {
			return nil, nil
		}
		if scanned >= maxScanned {
			return nil, fmt.Errorf("more than %d rows under grant %s at %s", maxScanned, row.GrantID, clock(row.IssuedAt))
		}
		q.PageToken = next
	}
}

// maxNanos is the last time an int64 of nanoseconds since the epoch holds.
var maxNanos = time.Unix(0, math.MaxInt64)

func dedup(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format("2 January 2006 15:04 UTC")
}

// clocks is clock of a and of b, to the second when both fall in one
// minute: an action and a revocation seconds apart must read in their
// order.
func clocks(a, b time.Time) (string, string) {
	if a.IsZero() || b.IsZero() || !a.Truncate(time.Minute).Equal(b.Truncate(time.Minute)) {
		return clock(a), clock(b)
	}
	return clockSecond(a), clockSecond(b)
}

// clockSecond is clock to the second.
func clockSecond(t time.Time) string {
	if t.IsZero() {
		return clock(t)
	}
	return t.UTC().Format("2 January 2006 15:04:05 UTC")
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// namedBySignedArgs reports whether the signed args argsJSON of action a
// name its target: as the write path recorded it (a.TargetSource), or, for
// a row written before it recorded this, as it reads the args.
func namedBySignedArgs(a verifier.RowAction, argsJSON string) bool {
	switch a.TargetSource {
	case verifier.TargetFromSignedArgs:
		return true
	case verifier.TargetFromWriter:
		return false
	}
	return verifier.NamesTarget(argsJSON, a.Target)
}

// clipped is s cut to at most n bytes, marked when cut.
func clipped(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// otherTargets reports whether rows a and b, posts of one receipt, file
// one of its actions under two different targets. A post without an
// action log (no target) files it under none: a pipeline's retry of the
// receipt alone is no other filing.
func otherTargets(a, b *ledger.Row) bool {
	for i := range min(len(a.Actions), len(b.Actions)) {
		if x, y := a.Actions[i].Target, b.Actions[i].Target; x != "" && y != "" && x != y {
			return true
		}
	}
	return false
}

// unfiledTargets lists the targets later, a post of the receipt first
// posted as earlier, files an action under where earlier files it under
// none (no target, or fewer actions).
func unfiledTargets(earlier, later *ledger.Row) []string {
	var out []string
	for i, a := range later.Actions {
		if a.Target != "" && (i >= len(earlier.Actions) || earlier.Actions[i].Target == "") && !slices.Contains(out, a.Target) {
			out = append(out, a.Target)
		}
	}
	return out
}

// whichFiling says what the record holds on which of two posts of one
// receipt, a and b (named an and bn), files its actions under the
// targets the application meant: where the targets differ, the one whose
// targets the signed args name (each row's recorded target source)
// where the other's are the action log's alone. The signed args may name
// other orders too (a "replaces" or "from"), so it is a pointer for the
// person who decides, not a decision.
func whichFiling(a, b *ledger.Row, an, bn string) string {
	signedA, signedB := true, true
	differ := false
	for i := range min(len(a.Actions), len(b.Actions)) {
		x, y := a.Actions[i], b.Actions[i]
		if x.Target == "" || y.Target == "" || x.Target == y.Target {
			continue
		}
		differ = true
		signedA = signedA && x.TargetSource == verifier.TargetFromSignedArgs && y.TargetSource == verifier.TargetFromWriter
		signedB = signedB && y.TargetSource == verifier.TargetFromSignedArgs && x.TargetSource == verifier.TargetFromWriter
	}
	switch {
	case differ && signedA:
		return fmt.Sprintf("the signed args name %s's targets, where %s's are the action log's alone", an, bn)
	case differ && signedB:
		return fmt.Sprintf("the signed args name %s's targets, where %s's are the action log's alone", bn, an)
	}
	return "the record cannot tell which"
}

// actionTargets lists the row's actions as "tool target", in order.
func actionTargets(row *ledger.Row) []string {
	out := make([]string, 0, len(row.Actions))
	for _, a := range row.Actions {
		out = append(out, strings.TrimSpace(a.Tool+" "+a.Target))
	}
	return out
}

// toolList is the row's distinct tools, in order.
func toolList(row *ledger.Row) []string {
	var out []string
	for _, a := range row.Actions {
		if !slices.Contains(out, a.Tool) {
			out = append(out, a.Tool)
		}
	}
	return out
}

func tools(row *ledger.Row) string {
	var out []string
	for _, a := range row.Actions {
		if t := asName(a.Tool); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return "a reply"
	}
	return strings.Join(out, ", ")
}

func targets(row *ledger.Row) string {
	t := row.Targets()
	if len(t) == 0 {
		return "the account"
	}
	out := make([]string, len(t))
	for i, v := range t {
		out[i] = asName(v)
	}
	return strings.Join(out, ", ")
}

func kindWord(row *ledger.Row) string {
	if row.Kind == ledger.KindRefusal {
		return "refusal"
	}
	return "row"
}

func refusalReason(row *ledger.Row) string {
	if row.Refusal != nil {
		return row.Refusal.Reason
	}
	return ""
}

// plural is n with noun, in the plural unless n is 1: "1 row", "2 rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// checkOf is the check of row named name, as recorded at write time.
func checkOf(row *ledger.Row, name string) (verifier.Check, bool) {
	for _, c := range row.Verifier.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return verifier.Check{}, false
}

// checkDetail is the detail of row's check named name, or "" without it.
func checkDetail(row *ledger.Row, name string) string {
	c, _ := checkOf(row, name)
	return c.Detail
}
