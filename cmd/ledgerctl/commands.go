package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/rowtext"
	"github.com/pactledger/pactledger/internal/termtext"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func (c *cli) printJSON(m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.out, termtext.EscapeJSON(b))
	return nil
}

func (c *cli) table() *tabwriter.Writer { return tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0) }

func when(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format("2006-01-02 15:04:05Z")
}

// plural is n with noun, in the plural unless n is 1: "1 row", "2 rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// word turns ROW_STATUS_INCIDENT into "incident".
func word(enum fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(enum.String(), prefix), "_", " "))
}

// rowTargets is the targets of r's actions, each once, for a table of
// rows: a target that is the writer's word alone (rowtext.TargetSource)
// is followed by writerOnlyMark; marked says whether one is.
func rowTargets(r *ledgerv1.Row) (cell string, marked bool) {
	plain, writerOnly := targetsOf(r)
	t := make([]string, len(plain))
	for i, v := range plain {
		t[i] = v
		if contains(writerOnly, v) {
			t[i] += writerOnlyMark
		}
	}
	return orDash(strings.Join(t, ",")), len(writerOnly) > 0
}

// targetsOf returns the targets of r's actions, each once, and those of
// them that are the writer's word alone in one action at least.
func targetsOf(r *ledgerv1.Row) (all, writerOnly []string) {
	for _, a := range r.GetActions() {
		if a.GetTarget() == "" {
			continue
		}
		if !contains(all, a.GetTarget()) {
			all = append(all, a.GetTarget())
		}
		if _, w := rowtext.TargetSource(r, a); w && !contains(writerOnly, a.GetTarget()) {
			writerOnly = append(writerOnly, a.GetTarget())
		}
	}
	return all, writerOnly
}

// claimedMark follows a principal or agent platform in lookup's table
// when no signature vouches for it; claimedNote, printed below, says so.
const (
	claimedMark = " (claimed)"
	claimedNote = "(claimed: no signature vouches for it, the writer's word: a refusal's agent platform without a verified request JWT, a receipt's principal and agent platform when its signature failed)"
)

// writerOnlyMark follows a target in a table of rows when no signed args
// name it; writerOnlyNote, printed below such a table, says so.
const (
	writerOnlyMark = "*"
	writerOnlyNote = "(* the writer's word alone: the customer's agent signed no args naming this target; ledgerctl show ROW says why)"
)

func rowTools(r *ledgerv1.Row) string {
	var t []string
	for _, a := range r.GetActions() {
		if !contains(t, a.GetTool()) {
			t = append(t, a.GetTool())
		}
	}
	return orDash(strings.Join(t, ","))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lookupOpts are lookup's flags.
type lookupOpts struct {
	order, target, principal, grant, agent, status, since, until string
	limit                                                        int
	all                                                          bool
}

func (c *cli) lookup(o lookupOpts) error {
	req := &ledgerv1.ListRowsRequest{Target: first(o.order, o.target), Principal: o.principal, GrantId: o.grant, Agent: o.agent}
	if req.Target == "" && req.Principal == "" && req.GrantId == "" && req.Agent == "" && o.status == "" && o.since == "" && o.until == "" {
		return usagef("lookup needs --order, --principal, --grant, --agent, --status or a time range")
	}
	if o.status != "" {
		v, ok := ledgerv1.RowStatus_value["ROW_STATUS_"+strings.ToUpper(o.status)]
		if !ok {
			return usagef("--status %q: want authorized, unauthorized, incident or duplicate", o.status)
		}
		req.Status = ledgerv1.RowStatus(v)
	}
	var err error
	if req.Since, err = parseTime("since", o.since); err != nil {
		return err
	}
	if req.Until, err = parseTime("until", o.until); err != nil {
		return err
	}
	if o.limit < 1 || o.limit > 1000 {
		return usagef("--limit must be 1 to 1000")
	}
	rep := &ledgerv1.ListRowsResponse{}
	if rep.NextPageToken, err = c.pagesUntil(o.all, "", o.limit, func(ctx context.Context, token string, want int) (int, string, error) {
		req.PageToken, req.PageSize = token, int32(want)
		page, err := c.c.ListRows(ctx, req)
		rep.Rows = append(rep.Rows, page.GetRows()...)
		return len(page.GetRows()), page.GetNextPageToken(), err
	}); err != nil {
		return err
	}
	// Ids match exactly, as in the console's search: an empty answer to
	// an id in another case or misspelt says so.
	const idsExact = "(ids match exactly: check the spelling and the case)"
	byID := req.Target != "" || req.Principal != "" || req.GrantId != "" || req.Agent != ""
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
		if len(rep.GetRows()) == 0 && byID {
			fmt.Fprintln(c.errw, idsExact)
		}
		return nil
	}
	l := listing{header: []string{"row", "issued (UTC)", "status", "principal", "target", "tool", "agent", "dispute"}}
	csv := c.output == "csv"
	if csv {
		// The target column holds the targets alone, as a program reads
		// them; what the table marks is a column of its own.
		l.header = append(l.header, "writer-only targets")
	}
	marked, claimed := false, false
	for _, r := range rep.GetRows() {
		id, targets, agent, principal := short(r.GetId()), "", orDash(r.GetAgent().GetPlatform()), orDash(r.GetPrincipal())
		var writerOnly []string
		if csv {
			var all []string
			all, writerOnly = targetsOf(r)
			id, targets = r.GetId(), orDash(strings.Join(all, ","))
		} else {
			var m bool
			targets, m = rowTargets(r)
			marked = marked || m
			if rowtext.ClaimedAgent(r) {
				agent += claimedMark
				claimed = true
			}
			if rowtext.ClaimedPrincipal(r) {
				principal += claimedMark
				claimed = true
			}
		}
		row := []string{id, when(r.GetIssuedAt()), word(r.GetStatus(), "ROW_STATUS_"),
			principal, targets, rowTools(r), agent, word(r.GetDisputeStatus(), "DISPUTE_STATUS_")}
		if csv {
			row = append(row, orDash(strings.Join(writerOnly, ",")))
		}
		l.rows = append(l.rows, row)
	}
	empty := "no rows match"
	if rep.GetNextPageToken() != "" {
		// Pages read a bounded number of entries a call: more may match.
		empty = "no rows match in the part of the ledger read so far"
	}
	if err := c.printList(l, empty); err != nil {
		return err
	}
	if marked {
		c.note("%s", writerOnlyNote)
	}
	if claimed {
		c.note("%s", claimedNote)
	}
	if len(rep.GetRows()) == 0 && byID {
		c.note("%s", idsExact)
	}
	switch {
	case rep.GetNextPageToken() != "" && len(rep.GetRows()) < o.limit:
		// Pages read a bounded number of entries a call (rows posted
		// under other names fill them): --limit would not help.
		c.note("(more may match: the ledger reads a bounded number of entries a call; --all reads on to the end)")
	case rep.GetNextPageToken() != "":
		c.note("(more rows: --all lists every one, or raise --limit or narrow the query)")
	}
	return nil
}

// rowArg checks a ROW argument: the full row id or a unique prefix of at
// least 8 hex characters (the 12 characters tables print will do); ledgerd
// resolves the prefix.
func rowArg(cmd string, pos []string) (string, error) {
	if len(pos) != 1 {
		return "", usagef("%s takes one ROW (the row id, or a unique prefix of at least 8 characters)", cmd)
	}
	id := strings.ToLower(pos[0])
	if !rowIDArg.MatchString(id) {
		return "", usagef("%q is not a row id: give the 64-character id or a unique prefix of at least 8 hex characters", pos[0])
	}
	return id, nil
}

var rowIDArg = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

func (c *cli) show(args []string) error {
	id, err := rowArg("show", args)
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.GetRow(ctx, &ledgerv1.GetRowRequest{Id: id})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	r := rep.GetRow()
	w := c.table()
	line := func(k, v string) { printf(w, "%s\t%s\n", k, v) }
	line("row", r.GetId())
	if r.GetKind() == ledgerv1.RowKind_ROW_KIND_REFUSAL {
		line("refusal hash", r.GetReceiptId())
	} else {
		line("receipt", r.GetReceiptId())
	}
	line("kind / status", word(r.GetKind(), "ROW_KIND_")+" / "+word(r.GetStatus(), "ROW_STATUS_"))
	if r.GetIncidentId() != "" {
		line("incident", r.GetIncidentId())
	}
	line("principal", orDash(r.GetPrincipal()))
	line("grant", orDash(r.GetGrantId()))
	line("brand", orDash(r.GetBrand()))
	line("agent platform", orDash(r.GetAgent().GetPlatform())+"  (kid "+orDash(r.GetAgent().GetRequestJwtKid())+", JWKS snapshot "+orDash(short(r.GetAgent().GetJwksSnapshot()))+")")
	line("brand key", orDash(r.GetBrandKey().GetKid())+"  (JWKS snapshot "+orDash(short(r.GetBrandKey().GetJwksSnapshot()))+")")
	line("scope granted", orDash(strings.Join(r.GetScopeGranted(), " ")))
	line("scopes used", orDash(strings.Join(r.GetScopesUsed(), " ")))
	for _, a := range r.GetActions() {
		line("action", fmt.Sprintf("%s %s  args hash %s (%s)", a.GetTool(), orDash(a.GetTarget()), orDash(a.GetArgsHash()), word(a.GetArgsHashSource(), "ARGS_HASH_SOURCE_")))
		// What vouches for the target, on a line of its own so that the
		// action line reads as it did.
		switch words, _ := rowtext.TargetSource(r, a); {
		case words == "":
		case a.GetTargetSource() == ledgerv1.TargetSource_TARGET_SOURCE_SIGNED_ARGS:
			line("target", a.GetTarget()+" ("+words+")")
		default:
			line("target", a.GetTarget()+": "+words)
		}
	}
	if r.GetRefusal() != nil {
		line("refusal", fmt.Sprintf("%s (claimed %s, agent %s)", r.GetRefusal().GetReason(), r.GetRefusal().GetClaimedPrincipal(), r.GetRefusal().GetClaimedAgent()))
	}
	if l := r.GetLimits(); l.GetAmountMax() != "" || l.GetCountMax() != 0 || l.GetGrantExpires() != nil {
		amount, count := "none recorded", "none recorded"
		if l.GetAmountMax() != "" {
			amount = "at most " + l.GetAmountMax()
		}
		if l.GetCountMax() != 0 {
			count = fmt.Sprintf("at most %d", l.GetCountMax())
		}
		line("limits", fmt.Sprintf("amount %s, count %s, delegation token expires %s", amount, count, when(l.GetGrantExpires())))
	}
	line("issued / recorded", when(r.GetIssuedAt())+" / "+when(r.GetRecordedAt()))
	line("retention", word(r.GetRetentionClass(), "RETENTION_CLASS_")+" until "+when(r.GetRetainUntil()))
	line("verified by", r.GetVerifier().GetCheckedBy()+" at "+when(r.GetVerifier().GetCheckedAt()))
	if d := r.GetVerifier().GetDuplicateOf(); d != "" {
		line("duplicate of", d)
	}
	line("dispute", word(r.GetDisputeStatus(), "DISPUTE_STATUS_"))
	w.Flush()
	fmt.Fprintln(c.out)
	c.checks("CHECK", r.GetVerifier().GetChecks(), nil)
	for _, e := range r.GetDisputeEvents() {
		printf(c.out, "dispute %s  %s by %s: %s\n", when(e.GetAt()), word(e.GetStatus(), "DISPUTE_STATUS_"), e.GetBy(), e.GetNote())
	}
	return nil
}

func (c *cli) checks(title string, checks, before []*ledgerv1.Check) {
	w := c.table()
	if before != nil {
		printf(w, "%s\tAT WRITE\tNOW\tDETAIL\n", title)
	} else {
		printf(w, "%s\tRESULT\tDETAIL\n", title)
	}
	for _, ch := range checks {
		res := word(ch.GetResult(), "CHECK_RESULT_")
		if before != nil {
			was := "-"
			for _, b := range before {
				if b.GetName() == ch.GetName() {
					was = word(b.GetResult(), "CHECK_RESULT_")
				}
			}
			printf(w, "%s\t%s\t%s\t%s\n", ch.GetName(), was, res, ch.GetDetail())
		} else {
			printf(w, "%s\t%s\t%s\n", ch.GetName(), res, ch.GetDetail())
		}
	}
	w.Flush()
}

func (c *cli) evidence(full bool, args []string) error {
	id, err := rowArg("evidence", args)
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.GetEvidence(ctx, &ledgerv1.GetEvidenceRequest{Id: id})
	if err != nil {
		return err
	}
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
		return c.evidenceDiffers(rep)
	}
	cut := func(s string) string {
		if full || len(s) <= 60 {
			return orDash(s)
		}
		n := 60
		for n > 0 && !utf8.RuneStart(s[n]) {
			n-- // between characters
		}
		return s[:n] + fmt.Sprintf("… (%d bytes; --full prints all)", len(s))
	}
	w := c.table()
	printf(w, "row\t%s\n", rep.GetRowId())
	printf(w, "evidence sha256\t%s\n", orDash(rep.GetEvidenceSha256()))
	if rep.GetNotKept() == "" {
		switch row := rep.GetRowEvidenceSha256(); {
		case row == "":
			printf(w, "write-time sha256\t- (this server does not say; ledgerctl show %s has it, ledgerctl verify %s compares)\n", id, id)
		case row == rep.GetEvidenceSha256():
			printf(w, "write-time sha256\t%s (matches)\n", row)
		default:
			printf(w, "write-time sha256\t%s (DIFFERS: see the WARNING)\n", row)
		}
		printf(w, "read from\t%s\n", readFromWords(rep.GetReadFrom(), id))
	}
	printf(w, "receipt JWS\t%s\n", cut(rep.GetReceiptJws()))
	printf(w, "request JWT\t%s\n", cut(rep.GetRequestJwt()))
	printf(w, "delegation token\t%s\n", cut(rep.GetDelegationToken()))
	for _, a := range rep.GetActions() {
		printf(w, "action log\t%s %s %s\n", a.GetTool(), orDash(a.GetTarget()), cut(a.GetArgsJson()))
	}
	for _, s := range rep.GetJwksSnapshots() {
		printf(w, "JWKS snapshot\t%s\n", s)
	}
	w.Flush()
	fmt.Fprintln(c.out)
	w = c.table()
	fmt.Fprintln(w, "OBJECT\tSTORE\tBUCKET/DIR\tKEY\tVERSION\tRETAIN UNTIL\tUPLOADED")
	for _, o := range rep.GetObjects() {
		key := o.GetKey()
		if o.GetLength() > 0 {
			key += fmt.Sprintf(" @%d+%d", o.GetOffset(), o.GetLength())
		}
		up := "yes"
		if !o.GetUploaded() {
			up = "no (in the outbox)"
		}
		printf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.GetName(), orDash(o.GetStore()), orDash(o.GetBucket()), key, orDash(o.GetVersionId()), when(o.GetRetainUntil()), up)
	}
	w.Flush()
	return c.evidenceDiffers(rep)
}

// readFromWords says where the ledger read the bundle of an evidence answer.
func readFromWords(from ledgerv1.EvidenceReadFrom, id string) string {
	switch from {
	case ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_ROW_STORE:
		return "the row store (not in write-once storage yet, or put back from its write-once copy)"
	case ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_WRITE_ONCE_COPY:
		return "its write-once copy, read now"
	case ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_CACHE:
		return "the ledger's cache of recent bundles, kept as written: the stored copy was not read (ledgerctl verify " + id + " reads it)"
	}
	return "- (this server does not say)"
}

// evidenceDiffers prints a WARNING and returns errCheckFailed when the
// bundle of an evidence answer does not hash to its row's write-time hash.
func (c *cli) evidenceDiffers(rep *ledgerv1.GetEvidenceResponse) error {
	row, read := rep.GetRowEvidenceSha256(), rep.GetEvidenceSha256()
	if rep.GetNotKept() != "" || row == "" || read == row {
		return nil
	}
	id := rep.GetRowId()
	where, todo := "", ""
	switch rep.GetReadFrom() {
	case ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_WRITE_ONCE_COPY:
		key := "-"
		for _, o := range rep.GetObjects() {
			if o.GetName() == "evidence" {
				key = o.GetKey()
			}
		}
		where = "its write-once copy (" + key + ")"
		todo = "ledgerctl fsck --restore cannot mend this: it puts a row's bundle back from its write-once copy, and that copy is the one that changed. " +
			"Run ledgerctl fsck, and look into it as possible tampering: see \"Proving nothing was edited\" in docs/operations.md."
	case ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_ROW_STORE:
		where = "the row store"
		todo = "Run ledgerctl fsck: it says whether the row's write-once copy still matches; if it does, ledgerctl fsck --restore (admin key) puts the bundle back from that copy. " +
			"Otherwise look into it as possible tampering: see \"Proving nothing was edited\" in docs/operations.md."
	default:
		where = "the ledger's cache of recent bundles"
		todo = "Run ledgerctl fsck, which reads the write-once copy, and look into it as possible tampering: see \"Proving nothing was edited\" in docs/operations.md."
	}
	printf(c.errw, "WARNING: the evidence of row %s is not the bundle written: read from %s, it hashes to %s; the row recorded %s at write time. "+
		"It was changed after it was written: do not send it as the row's evidence. %s\n", id, where, read, row, todo)
	return errCheckFailed
}

func (c *cli) verify(args []string) error {
	id, err := rowArg("verify", args)
	if err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.VerifyRow(ctx, &ledgerv1.VerifyRowRequest{Id: id})
	if err != nil {
		return err
	}
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else {
		c.checks("CHECK", rep.GetChecks(), rep.GetWriteTimeChecks())
		if rep.GetSame() {
			fmt.Fprintln(c.out, "\nsame result as at write time: the stored bytes and snapshots still give the recorded verdict")
		} else {
			printf(c.out, "\nDIFFERENT from write time: %s\n", rep.GetDifferences())
		}
	}
	if !rep.GetSame() {
		return errCheckFailed
	}
	return nil
}

var resolutions = map[string]ledgerv1.DisputeStatus{
	"customer-authorized": ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_CUSTOMER_AUTHORIZED,
	"incident":            ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_INCIDENT,
	"other":               ledgerv1.DisputeStatus_DISPUTE_STATUS_RESOLVED_OTHER,
}

// disputeUsage is dispute's synopsis.
const disputeUsage = "dispute open ROW --note TEXT | dispute resolve ROW --as customer-authorized|incident|other --note TEXT"

func (c *cli) dispute(note, as string, pos []string) error {
	if len(pos) != 2 || (pos[0] != "open" && pos[0] != "resolve") {
		return usagef("%s", disputeUsage)
	}
	// A resolution is said, never assumed: a default would record
	// "other" over an earlier resolution given with --as.
	switch {
	case pos[0] == "resolve" && as == "":
		return usagef("dispute resolve needs --as: customer-authorized (the customer authorized it), incident (the row's incident) or other")
	case pos[0] == "open" && as != "":
		return usagef("--as is for dispute resolve: dispute open takes --note only")
	}
	id, err := rowArg("dispute", pos[1:])
	if err != nil {
		return err
	}
	if strings.TrimSpace(note) == "" {
		return usagef("dispute needs --note: say what the customer said or how it was resolved")
	}
	st := ledgerv1.DisputeStatus_DISPUTE_STATUS_OPEN
	if pos[0] == "resolve" {
		var ok bool
		if st, ok = resolutions[as]; !ok {
			return usagef("--as %q: want customer-authorized, incident or other", as)
		}
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.AppendDisputeEvent(ctx, &ledgerv1.AppendDisputeEventRequest{Id: id, Status: st, Note: note})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	evs := rep.GetRow().GetDisputeEvents()
	e := evs[len(evs)-1]
	printf(c.out, "row %s: dispute %s at %s by %s (%s)\n", short(id), word(e.GetStatus(), "DISPUTE_STATUS_"), when(e.GetAt()), e.GetBy(), plural(len(evs), "event"))
	return nil
}

// drillOpts are drill's flags.
type drillOpts struct {
	row, principal, proofDir string
	monthly                  bool
	sample                   int
	sampleSet                bool // --sample was given
}

func (c *cli) drill(o drillOpts, pos []string) error {
	var err error
	if o.row != "" {
		if o.row, err = rowArg("drill --row", []string{o.row}); err != nil {
			return err
		}
	}
	switch {
	case o.sampleSet && !o.monthly:
		return usagef("--sample is for drill --monthly")
	case o.sampleSet && (o.sample < 1 || o.sample > 100):
		return usagef("--sample %d: 1 to 100 rows", o.sample)
	}
	req := &ledgerv1.RunDrillRequest{RowId: o.row, Principal: o.principal}
	switch {
	case o.monthly:
		if len(pos) > 0 || o.row != "" || o.principal != "" {
			return usagef("drill --monthly takes only --sample")
		}
		req.Monthly = &ledgerv1.MonthlyDrill{Sample: int32(o.sample)}
	case len(pos) == 1:
		req.Target = pos[0]
	case len(pos) > 1:
		return usagef("drill takes one TARGET (an order id)")
	case o.row == "" && o.principal == "":
		return usagef("drill TARGET, drill --row ROW, drill --principal P or drill --monthly")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rep, err := c.c.RunDrill(ctx, req)
	if err != nil {
		return err
	}
	// The proof files are written first: the reply says one is attached
	// only when one was written.
	wrote, werr := 0, error(nil)
	if o.proofDir != "" {
		wrote, werr = c.writeProofs(o.proofDir, rep.GetReport())
	}
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else {
		c.printDrill(rep.GetReport(), wrote > 0 && werr == nil)
	}
	if d := rep.GetReport(); req.Target != "" && len(d.GetRows()) == 0 && len(d.GetListed()) == 0 && rowIDArg.MatchString(strings.ToLower(req.Target)) {
		// An order id that reads as a row id (the ids tables print) may
		// be one: the drill looked for an order of that name.
		printf(c.errw, "ledgerctl drill: no order %s in the ledger, and %s looks like a row id: did you mean --row %s?\n", req.Target, req.Target, req.Target)
	}
	if werr != nil {
		return werr
	}
	if rep.GetReport().GetChecksPassed() < rep.GetReport().GetChecksTotal() {
		return errCheckFailed
	}
	return nil
}

// printDrill prints a drill report; withProof says the drilled rows'
// proof files were written to go with the reply, which then says so.
func (c *cli) printDrill(d *ledgerv1.DrillReport, withProof bool) {
	took := d.GetFinishedAt().AsTime().Sub(d.GetStartedAt().AsTime())
	printf(c.out, "drill %s (%s) by %s at %s, %s, took %s\n\n", d.GetId(), word(d.GetKind(), "DRILL_KIND_"), orDash(d.GetRunBy()), when(d.GetStartedAt()), plural(len(d.GetRows()), "row"), took.Round(time.Microsecond))
	if len(d.GetPulls()) > 0 {
		w := c.table()
		fmt.Fprintln(w, "ROW\tPULL\tRESULT\tMS\tDETAIL")
		for _, p := range d.GetPulls() {
			res := "pass"
			if !p.GetPassed() {
				res = "FAIL"
			}
			printf(w, "%s\t%s\t%s\t%.1f\t%s\n", orDash(short(p.GetRowId())), p.GetName(), res, p.GetElapsedMs(), p.GetDetail())
		}
		w.Flush()
	}
	for _, l := range d.GetListed() {
		printf(c.out, "listed %s  %s\n", short(l.GetRowId()), l.GetDetail())
	}
	if d.GetNote() != "" {
		printf(c.out, "\n%s\n", d.GetNote())
	}
	if d.GetChecksTotal() > 0 {
		printf(c.out, "\nscore: %d of %d checks passed\n", d.GetChecksPassed(), d.GetChecksTotal())
	} else {
		fmt.Fprintln(c.out, "\nscore: nothing scored")
	}
	c.printDrillLog(d)
	reply := d.GetReply()
	if withProof && d.GetReplyWithProof() != "" {
		reply = d.GetReplyWithProof()
	}
	if reply != "" {
		printf(c.out, "\nreply to the customer:\n%s\n", multiline(reply))
	}
	if d.GetDetailsTruncated() {
		where := "its write-once object"
		if k := d.GetObject().GetKey(); k != "" {
			where += " " + k
		}
		printf(c.out, "\n(details cut in this answer, each at 2 KiB and the reply at 64 KiB, ending \"… (N bytes more)\": the stored report and %s hold them whole)\n", where)
	}
}

// listOpts are the flags of a command that lists: page size, a page to
// start from and whether to page through every result.
type listOpts struct {
	limit int
	page  string
	all   bool
}

func (o listOpts) check() error {
	if o.limit < 1 || o.limit > 1000 {
		return usagef("--limit must be 1 to 1000")
	}
	return nil
}

func (c *cli) drills(o listOpts, pos []string) error {
	if len(pos) == 1 {
		ctx, cancel := c.ctx()
		defer cancel()
		rep, err := c.c.GetDrill(ctx, &ledgerv1.GetDrillRequest{Id: pos[0]})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(rep)
		}
		if c.output == "csv" {
			return usagef("--output csv lists drills; one drill prints as a table or JSON")
		}
		c.printDrill(rep.GetReport(), false)
		return nil
	}
	if len(pos) > 1 {
		return usagef("drills [ID] [--limit N] [--all]")
	}
	if err := o.check(); err != nil {
		return err
	}
	rep := &ledgerv1.ListDrillsResponse{}
	var err error
	if rep.NextPageToken, err = c.pagesUntil(o.all, o.page, o.limit, func(ctx context.Context, token string, want int) (int, string, error) {
		page, err := c.c.ListDrills(ctx, &ledgerv1.ListDrillsRequest{PageSize: int32(want), PageToken: token})
		rep.Reports = append(rep.Reports, page.GetReports()...)
		return len(page.GetReports()), page.GetNextPageToken(), err
	}); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(rep)
	}
	l := listing{header: []string{"drill", "kind", "started (UTC)", "by", "rows", "score", "took"}}
	for _, d := range rep.GetReports() {
		took := d.GetFinishedAt().AsTime().Sub(d.GetStartedAt().AsTime()).Round(time.Millisecond)
		score := fmt.Sprintf("%d/%d", d.GetChecksPassed(), d.GetChecksTotal())
		if d.GetChecksTotal() == 0 && strings.HasPrefix(d.GetNote(), "nothing to drill") {
			score = "nothing to drill"
		}
		l.rows = append(l.rows, []string{d.GetId(), word(d.GetKind(), "DRILL_KIND_"), when(d.GetStartedAt()), orDash(d.GetRunBy()), fmt.Sprint(len(d.GetRows())), score, took.String()})
	}
	if err := c.printList(l, "no drills yet"); err != nil {
		return err
	}
	if rep.GetNextPageToken() != "" {
		c.note("(more drills: --all lists every one, or --page %s)", rep.GetNextPageToken())
	}
	return nil
}
