package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/s3"
	"github.com/pactledger/pactledger/verifier"
)

// tileHeight is the C2SP tlog-tiles height.
const tileHeight = 8

// restBase is ledgerd's REST base: --http, PACTLEDGER_HTTP or the config
// file's http, else the --server host on the default REST port 8080.
func (c *cli) restBase() string {
	if c.httpBase != "" {
		return strings.TrimSuffix(c.httpBase, "/")
	}
	host, _, err := net.SplitHostPort(c.server)
	if err != nil {
		host = c.server
	}
	scheme := "http"
	if c.tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, "8080")
}

// tiles reads the log's C2SP tiles from ledgerd's /v1/log/ (public),
// each request within the client's timeout.
type tiles struct {
	base   string
	client *http.Client

	saved map[string][]byte // tiles a tree's hashes were checked against, by path
	order []string          // their paths, oldest first
}

// maxSavedTiles bounds the tiles kept: 8 MiB of full hash tiles.
const maxSavedTiles = 1024

// fetchError: a tile could not be read (the network, the server failing);
// the audit stops on it, where a tile that was read and does not match,
// or one the server says it does not have, is a finding.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// maxTileRedirects bounds the redirects a tile read follows.
const maxTileRedirects = 5

// tileClient is the HTTP client tiles are read with: each request within
// timeout, following redirects only within the host it asked (a proxy in
// front of ledgerd may redirect a path), never to another host, which
// could serve any tiles and learn what the audit reads.
func tileClient(timeout time.Duration, tlsConf *tls.Config) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxTileRedirects {
				return fmt.Errorf("stopped after %d redirects", len(via))
			}
			if from := via[0].URL; req.URL.Host != from.Host || req.URL.Scheme != from.Scheme {
				return fmt.Errorf("refused a redirect from %s to %s: the tiles are read from the ledger's host only", from.Redacted(), req.URL.Redacted())
			}
			return nil
		},
	}
}

func (t *tiles) get(path string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, t.base+"/v1/log/"+path, nil)
	if err != nil {
		return nil, &fetchError{err}
	}
	res, err := t.client.Do(req)
	if err != nil {
		return nil, &fetchError{fmt.Errorf("fetch %s: %w (set the REST base with --http)", req.URL, err)}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<24))
	if err != nil {
		return nil, &fetchError{fmt.Errorf("fetch %s: %w", req.URL, err)}
	}
	switch {
	case res.StatusCode == http.StatusNotFound:
		// A tile of a tree the log's key signed, withheld.
		return nil, fmt.Errorf("fetch %s: %s: the server does not give a tile of the tree it signed", req.URL, res.Status)
	case res.StatusCode != http.StatusOK:
		return nil, &fetchError{fmt.Errorf("fetch %s: %s", req.URL, res.Status)}
	}
	return b, nil
}

// Height implements tlog.TileReader.
func (t *tiles) Height() int { return tileHeight }

// ReadTiles implements tlog.TileReader: C2SP paths have no height element.
func (t *tiles) ReadTiles(ts []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(ts))
	for i, tile := range ts {
		if b, ok := t.saved[tile.Path()]; ok {
			out[i] = b
			continue
		}
		b, err := t.get(c2spPath(tile))
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// SaveTiles implements tlog.TileReader: it keeps the tiles the reader
// checked (the latest maxSavedTiles), so that the rows' leaves, read
// newest first, seldom fetch a tile twice. A kept tile is checked again
// whenever it is read.
func (t *tiles) SaveTiles(ts []tlog.Tile, data [][]byte) {
	if t.saved == nil {
		t.saved = map[string][]byte{}
	}
	for i, tile := range ts {
		p := tile.Path()
		if _, ok := t.saved[p]; ok {
			continue
		}
		if len(t.order) == maxSavedTiles {
			delete(t.saved, t.order[0])
			t.order = t.order[1:]
		}
		t.saved[p] = data[i]
		t.order = append(t.order, p)
	}
}

// entries reads the leaves of level-0 tile n, w of them (C2SP entry
// bundle: each leaf as a big-endian uint16 length and its bytes).
func (t *tiles) entries(n int64, w int) ([][]byte, error) {
	tile := tlog.Tile{H: tileHeight, L: 0, N: n, W: w}
	path := strings.Replace(tile.Path(), "tile/8/0/", "tile/entries/", 1)
	b, err := t.get(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
			return nil, fmt.Errorf("entry bundle %s is cut short", path)
		}
		l := int(binary.BigEndian.Uint16(b))
		out = append(out, b[2:2+l])
		b = b[2+l:]
	}
	if len(out) != w {
		return nil, fmt.Errorf("entry bundle %s holds %d leaves, want %d", path, len(out), w)
	}
	return out, nil
}

// auditor compares leaves with the rows the API key can read.
type auditor struct {
	c          *cli
	mismatches []string
	rows       map[string]*ledgerv1.Row // read rows, by id
	listed     []string                 // the rows the unfiltered listing gave, in its order (newest first)
	seen       map[string]bool          // rows whose leaf was compared
	swept      int
	compared   int
	notRows    int // leaves of other kinds not compared

	tombstones map[string]*tombstone // tombstones of rows read as swept, by id

	incidentRows map[string]incidentRow // rows whose leaf says status incident, by id
	// incidentLeaves are the leaves of rows that opened an incident
	// (status incident) read from the tiles, by row: each incident's
	// grant and opening, for the rows its grant holds (checkTombstones).
	incidentLeaves map[string]incidentLeaf
	closures       map[string]bool    // incidents whose closure leaf was read from the tiles
	closedAt       map[string]closure // closure leaves read from the tiles, by row
	tombs          []sweptLeaf        // leaves of rows the server answers as swept
	sweptEvents    []sweptLeaf        // dispute leaves of rows the server answers as swept
	policies       []policyLeaf       // policy leaves read from the tiles, in order

	// incidentsByGrant are incidentLeaves by grantKey, each grant's in
	// leaf order: built once, when grantHeld first needs it (every leaf
	// is read by then), so that each swept row is compared with its own
	// grant's incidents only. heldVisits counts the incident leaves
	// grantHeld compared with swept rows.
	incidentsByGrant map[[16]byte][]incidentLeaf
	heldVisits       int

	newer   proof.Checkpoint          // the audited checkpoint
	hashes  tlog.HashReader           // its tree's hashes, from tiles checked against it
	extends map[proof.Checkpoint]bool // later checkpoints proven to extend newer

	// verifier runs each compared row's checks again (reverify), with
	// the keys of the snapshots read (snapshots, by id); reverified
	// counts the rows it ran them on.
	verifier   *verifier.Verifier
	snapshots  map[string]heldSnapshot
	reverified int
	keys       map[signingKey]int // the keys the rows run again passed with, and how many rows
	held       map[string]int     // what their tokens were held to (noteHeld), and how many rows

	older       []rowLeafRef                 // receipt and refusal leaves before the compared ones, for checkRowsPresent
	unchecked   int                          // rows of older leaves checkRowsPresent did not look up (maxPresenceChecks)
	revocations map[string]*loggedRevocation // revocation leaves read from the tiles, by the grant id's hash
	eventLeaves map[string]eventLeaf         // dispute leaves read from the tiles, by ref (the first of each)
	firstLeaf   leafIndex                    // the first leaf read of each row, event and closure, by ref (leafRef)
	// ordered is the first leaf whose recording time read checks against
	// the leaves before it: the kept checkpoint's size (0 with --all). An
	// earlier leaf was checked by the audit that kept the checkpoint, so
	// a finding there (a clock once stepped back, say) is not made again
	// by every audit after it.
	ordered int64
	// orderedLatest and orderedLeaf are the latest time a leaf records
	// from the kept checkpoint's last leaf on (from the first with
	// --all), and the leaf that records it: what read holds the leaves
	// since against. A leaf dated ahead before the kept checkpoint (a
	// clock that ran ahead, found and looked at) is not held against every
	// row after it.
	orderedLatest time.Time
	orderedLeaf   int64
	latest        time.Time // the latest time a leaf of the audited tree records
	latestLeaf    int64     // the leaf that records it
	events        eventCounts
	notYet        []string // events not yet checkable, in words

	// bucket is the log in the ledger's bucket, read by the audit
	// (--s3-*; nil without); bucketFailed: comparing it found a
	// mismatch.
	bucket       *bucketWitness
	bucketFailed bool
}

// rowLeafRef is a receipt or refusal leaf read from the tiles: what a
// swept row's tombstone is checked against.
type rowLeafRef struct {
	index                             int64
	kind, id, class, status, recorded string
	grant                             [16]byte // grantKey of its grant line
}

// grantKey keys a leaf's grant line (the grant id's hash): the first 16
// bytes of its SHA-256, as leafIndex keys refs, so that the leaves kept
// for checkRowsPresent hold no copy of the line. Zero for a leaf without
// a grant ("-" or no line).
func grantKey(grant string) [16]byte {
	if grant == "" || grant == "-" {
		return [16]byte{}
	}
	return leafKey("grant/" + grant)
}

// eventLeaf is a dispute leaf read from the tiles; compared once it was
// compared with the row's event.
type eventLeaf struct {
	index    int64
	leaf     map[string]string
	compared bool
}

// eventCounts counts the dispute events the rows show, by how each was
// checked.
type eventCounts struct {
	inTree, since int
}

// eventSkew is how much earlier than a leaf of the audited tree a row or
// an event may be recorded and still be after it in the log. The log
// takes leaves in the order their transactions commit, each leaf queued
// in the transaction that records its row or event, but the time a leaf
// records is read from the clock of the replica that writes it, before
// the commit: a row's recording time and an event's when the transaction
// builds them (again on each retry), a closure's just before. Two writes
// then reach the log in the other order than their times when
//   - replicas' clocks differ (NTP keeps them well within a second);
//   - a write waits before it commits (a busy database, PostgreSQL's
//     grouped commits, a lock), while a later one commits first;
//   - on PostgreSQL, a leaf takes its place in the queue (leaf_seq) when
//     its transaction's writes are sent, not when it commits, so a
//     transaction sent earlier and committed later is logged after one
//     sent later and already logged.
//
// Each is seconds at most; five minutes leaves room for a clock stepped
// back and a slow database, while a row backdated by less changes
// nothing retention decides (its periods are days and months).
const eventSkew = 5 * time.Minute

// noteTime keeps the latest time a leaf records (a row's recording, an
// event's or a policy's time): the audited tree holds every leaf
// committed before the one that records it, give or take eventSkew.
func (a *auditor) noteTime(index int64, leaf map[string]string) {
	if t, ok := leafTime(leaf); ok && t.After(a.latest) {
		a.latest, a.latestLeaf = t, index
	}
}

// leafTime is the time a leaf records: a row's recording, an event's or a
// policy's time.
func leafTime(leaf map[string]string) (time.Time, bool) {
	v := leaf["at"]
	if leaf["kind"] == "receipt" || leaf["kind"] == "refusal" || leaf["kind"] == "revocation" {
		v = leaf["recorded"]
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// canonicalNumber reports whether s is a non-negative decimal number as
// the ledger writes one (strconv.Itoa): no sign, no leading zero.
func canonicalNumber(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && strconv.Itoa(n) == s
}

// disputeRef is the ref the ledger gives the n-th dispute event of a row.
func disputeRef(row string, n int) string { return "dispute/" + row + "/" + strconv.Itoa(n) }

// leafRef is the ref of what a leaf logs, and its words: a row, a row's
// dispute event, an incident's closure or a grant's revocation, each of
// which the ledger logs once, in the transaction that records it ("" for a policy leaf, of
// which each start logs one, and for kinds this version does not know).
func leafRef(leaf map[string]string) (ref, what, rule string) {
	switch leaf["kind"] {
	case "receipt", "refusal":
		return leaf["row"], "row " + leaf["row"], "a row is logged once"
	case "dispute":
		// The number as every check reads it (strconv.Atoi, as note and
		// compare do): "event 00" is a second leaf of event 0, not a leaf
		// of an event of its own.
		if n, err := strconv.Atoi(leaf["event"]); err == nil {
			return disputeRef(leaf["row"], n), "dispute event " + strconv.Itoa(n) + " of row " + leaf["row"], "an event is logged once"
		}
		return "dispute/" + leaf["row"] + "/" + leaf["event"], "dispute event " + leaf["event"] + " of row " + leaf["row"], "an event is logged once"
	case "incident-close":
		return closureRef(leaf["incident"]), "the closure of incident " + leaf["incident"], "an incident is closed once"
	case "revocation":
		return revocationRef(leaf), "the revocation as of " + leaf["revoked"] + " of the grant whose id hashes to " + leaf["grant"], "a revocation is logged once"
	}
	return "", "", ""
}

// leafIndex holds the first leaf read of each ref, keyed by the first 16
// bytes of the ref's SHA-256: an audit reads every leaf of the log, and
// a map of ten million refs as strings took over a gigabyte. Two refs
// that shared a key would read as one ref's two leaves, a mismatch to
// look into, never a second leaf missed.
type leafIndex map[[16]byte]int64

func leafKey(ref string) [16]byte {
	sum := sha256.Sum256([]byte(ref))
	return [16]byte(sum[:16])
}

func (m leafIndex) get(ref string) (int64, bool) {
	i, ok := m[leafKey(ref)]
	return i, ok
}

func (m leafIndex) set(ref string, index int64) { m[leafKey(ref)] = index }

// closureRef is the ref of the closure of incident id in firstLeaf.
func closureRef(id string) string { return "incident/" + id + "/close" }

// read checks what one leaf read from the tiles says of the log itself,
// whatever the rows say, and is called for every leaf read, in order:
//
//   - A row, event or closure with a leaf read before is a finding. The
//     ledger never logs one again, so the second leaf was queued behind
//     its back, with the row store edited to match it: the row's proof
//     then names the newer leaf, and a row compared with it alone would
//     pass with the values the log committed to first rewritten.
//   - A leaf recorded more than eventSkew before a leaf the log holds
//     before it (a row's recording, a dispute event's, a closure's, a
//     start's time) is a finding: the log takes leaves in the order they
//     commit, so it was not recorded when it says (a row or event
//     inserted in the row store later, backdated, with its leaf queued),
//     or the leaf before it is dated ahead. Leaves from a.ordered on are checked so
//     (those since the kept checkpoint, or every one with --all), against
//     the leaves from the kept checkpoint's last one on.
//   - A leaf whose first line is not the version line the ledger writes
//     is a finding: it parses to nothing, so no check would read it.
//   - A dispute leaf whose event number is not written as the ledger
//     writes one (decimal, without sign or leading zero) is a finding:
//     every check reads it as the number it spells (leafRef, note,
//     compare), so "event 00" is a second leaf of event 0.
//   - A leaf in which a name appears twice, or a line is no name and
//     value, is a finding (proof.ParseLeaf): the ledger writes each line
//     once, and the checks here read the last of two lines, where a
//     customer or another tool reading the leaf top down reads the first,
//     so one signed leaf would say two things. The leaf is still read
//     as the checks read it, for what else it shows.
func (a *auditor) read(index int64, data []byte) {
	if first, _, _ := strings.Cut(string(data), "\n"); first != leafVersion {
		a.mismatch("leaf %d does not start with the line %q this version of the ledger writes (it starts %q): no check of the log reads it, and it proves nothing; it was queued outside the ledger, or by a later version (audit with a ledgerctl of the ledger's version)",
			index, leafVersion, first)
		return
	}
	leaf := parseLeaf(string(data))
	if _, err := proof.ParseLeaf(string(data)); err != nil {
		a.mismatch("leaf %d (%s of row %s) is not a leaf the ledger writes: %v; the ledger writes each line once, as a name and a value, so it was queued outside the ledger, and readers may disagree on what it says (one taking the first of two lines, another the last)",
			index, dash(leaf["kind"]), dash(leaf["row"]), err)
	}
	if ev := leaf["event"]; leaf["kind"] == "dispute" && !canonicalNumber(ev) {
		a.mismatch("leaf %d (dispute of row %s): its event line %q is not a number as the ledger writes it (decimal, without sign or leading zero): the ledger did not write this leaf",
			index, leaf["row"], ev)
	}
	if leaf["kind"] == "receipt" && leaf["status"] == "incident" && a.incidentLeaves != nil {
		if _, ok := a.incidentLeaves[leaf["row"]]; !ok {
			il := incidentLeaf{index: index, row: strings.Clone(leaf["row"]), grant: strings.Clone(leaf["grant"])}
			il.recorded, _ = time.Parse(time.RFC3339Nano, leaf["recorded"])
			a.incidentLeaves[il.row] = il
		}
	}
	if ref, what, rule := leafRef(leaf); ref != "" {
		if first, ok := a.firstLeaf.get(ref); ok {
			a.mismatch("%s has two leaves, %d and %d: %s, so leaf %d was queued outside the ledger, and the row store may have been changed to match it (the values leaf %d logged are what the ledger recorded)",
				what, first, index, rule, index, first)
		} else {
			a.firstLeaf.set(ref, index)
		}
	}
	t, dated := leafTime(leaf)
	if dated && index >= a.ordered && !a.orderedLatest.IsZero() && t.Add(eventSkew).Before(a.orderedLatest) {
		_, what, _ := leafRef(leaf)
		if what == "" {
			what = "the " + leaf["kind"] + " " + leaf["policy"]
		}
		a.mismatch("leaf %d (%s) is recorded %s, more than %s before leaf %d, recorded %s, which the log holds before it: the log takes leaves in the order they commit, so one of the two is not dated when it was recorded: %s was inserted in the row store later and backdated, its leaf queued outside the ledger; or leaf %d is dated ahead; or the clock of a replica that recorded one of them was wrong",
			index, what, t.Format(time.RFC3339Nano), eventSkew, a.orderedLeaf, a.orderedLatest.Format(time.RFC3339Nano), what, a.orderedLeaf)
	}
	if dated && index >= a.ordered-1 && t.After(a.orderedLatest) {
		a.orderedLatest, a.orderedLeaf = t, index
	}
	a.noteTime(index, leaf)
}

// note reads a leaf before those compared with the ledger: a row's leaf
// is kept for checkRowsPresent, a dispute leaf for checkEvents, and an
// incident's closure and a policy are read as compare reads them.
func (a *auditor) note(index int64, data []byte) error {
	leaf := parseLeaf(string(data))
	switch leaf["kind"] {
	case "receipt", "refusal":
		// Copies: the values are parts of the leaf's text, which they
		// would keep whole for the rest of the audit.
		a.older = append(a.older, rowLeafRef{index: index, kind: strings.Clone(leaf["kind"]), id: strings.Clone(leaf["row"]), class: strings.Clone(leaf["class"]),
			status: strings.Clone(leaf["status"]), recorded: strings.Clone(leaf["recorded"]), grant: grantKey(leaf["grant"])})
	case "dispute":
		if n, err := strconv.Atoi(leaf["event"]); err == nil {
			a.noteEvent(disputeRef(leaf["row"], n), eventLeaf{index: index, leaf: leaf})
		}
	case "incident-close", "policy":
		return a.compare(index, data)
	case "revocation":
		a.noteRevocation(index, leaf)
	}
	return nil
}

// noteEvent keeps a dispute leaf read from the tiles for checkEvents: the
// first of its event's leaves (a second one is a finding of read).
func (a *auditor) noteEvent(ref string, l eventLeaf) {
	if _, ok := a.eventLeaves[ref]; !ok {
		a.eventLeaves[ref] = l
	}
}

// inAuditedLog checks that a row's proof, already verified under its
// checkpoint cp, proves a leaf of the audited log: a checkpoint signed by
// the log's key proves nothing by itself, since whoever holds the key can
// sign another tree. A leaf within the audited tree must be the tree's
// own leaf at that index (from the tiles, checked against the audited
// checkpoint); a leaf logged since must be proven under a checkpoint that
// extends the audited one (an RFC 6962 consistency proof). Either failure
// is an *inconsistent.
func (a *auditor) inAuditedLog(b *proof.Bundle, cp proof.Checkpoint) error {
	if b.LeafIndex < a.newer.Size {
		hs, err := a.hashes.ReadHashes([]int64{tlog.StoredHashIndex(0, b.LeafIndex)})
		var fetch *fetchError
		if errors.As(err, &fetch) {
			return err
		}
		if err != nil {
			return &inconsistent{fmt.Errorf("the tiles do not give leaf %d of the audited tree: %w", b.LeafIndex, err)}
		}
		if tlog.RecordHash([]byte(b.Leaf)) != hs[0] {
			return &inconsistent{fmt.Errorf("its leaf %d is not the audited tree's leaf %d (the proof is under a checkpoint of size %d, root %x, of another tree)", b.LeafIndex, b.LeafIndex, cp.Size, cp.Hash[:])}
		}
		return nil
	}
	if a.extends[cp] {
		return nil
	}
	if err := a.c.consistent(a.newer, cp); err != nil {
		return err
	}
	a.extends[cp] = true
	return nil
}

func (a *auditor) mismatch(format string, args ...any) {
	a.mismatches = append(a.mismatches, fmt.Sprintf(format, args...))
}

// tombstone is what the server says of a swept row (ROW_EXPIRED): its
// class and status, and its retain-until and sweep time (RFC 3339); a
// value the server does not give is "".
type tombstone struct{ class, status, retainUntil, sweptAt string }

// problems lists what a tombstone lacks, or gives in no form the server
// writes. The server tells a key that reads rows (the audit's) each of
// the four (docs/api.md; only a writer is told less), so a tombstone
// without one is no record of a sweep: answering a deleted row's GetRow
// so would otherwise pass every check of the tombstone, each of which
// needs its values.
func (t *tombstone) problems() []string {
	var missing, bad []string
	for _, v := range []struct{ name, value string }{
		{"retainUntil", t.retainUntil}, {"sweptAt", t.sweptAt}, {"retentionClass", t.class}, {"status", t.status},
	} {
		if v.value == "" {
			missing = append(missing, v.name)
		}
	}
	for _, v := range []struct{ name, value string }{{"retainUntil", t.retainUntil}, {"sweptAt", t.sweptAt}} {
		if _, err := time.Parse(time.RFC3339, v.value); v.value != "" && err != nil {
			bad = append(bad, fmt.Sprintf("%s %q is not an RFC 3339 time", v.name, v.value))
		}
	}
	if _, err := retention.ParseClass(t.class); t.class != "" && err != nil {
		bad = append(bad, fmt.Sprintf("retentionClass %q is no retention class", t.class))
	}
	if len(missing) > 0 {
		bad = append([]string{"its tombstone lacks " + strings.Join(missing, ", ")}, bad...)
	}
	return bad
}

// row reads a row once; nil with no error when it was swept by retention
// (then tomb is its tombstone). A tombstone that lacks a value the server
// gives a key that reads rows is a mismatch, made once per row.
//
// The audit's key reads every row (support, auditor and admin each do;
// the server refuses no such key one row and not another), so a row the
// server will not show it is errUnreadable, which the callers report: a
// server answering a deleted row's GetRow so would otherwise have the row
// counted as one this key cannot read, and pass. A key that reads no rows
// (a writer) stops the audit at ListRows (everyRowHasALeaf) with the
// server's refusal, before any of these is printed.
func (a *auditor) row(id string) (r *ledgerv1.Row, tomb *tombstone, err error) {
	if r, ok := a.rows[id]; ok {
		return r, nil, nil
	}
	if t, ok := a.tombstones[id]; ok {
		return nil, t, nil
	}
	ctx, cancel := a.c.ctx()
	defer cancel()
	rep, err := a.c.c.GetRow(ctx, &ledgerv1.GetRowRequest{Id: id})
	if err != nil {
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.NotFound:
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "ROW_EXPIRED" {
					m := info.GetMetadata()
					t := &tombstone{class: m["retentionClass"], status: m["status"], retainUntil: m["retainUntil"], sweptAt: m["sweptAt"]}
					if p := t.problems(); len(p) > 0 {
						a.mismatch("row %s: the server answers it as swept by retention (ROW_EXPIRED), but %s: a key that reads rows is told each of a swept row's retain-until, sweep time, class and status, so this is no record of a sweep, and the row may have been deleted",
							id, strings.Join(p, "; "))
					}
					a.tombstones[id] = t
					return nil, t, nil
				}
			}
			return nil, nil, errRowMissing
		case codes.PermissionDenied:
			return nil, nil, fmt.Errorf("%w (the server says: %s)", errUnreadable, st.Message())
		}
		return nil, nil, err
	}
	a.rows[id] = rep.GetRow()
	return rep.GetRow(), nil, nil
}

var (
	errRowMissing = errors.New("the ledger does not hold the row")
	errUnreadable = errors.New("the server refuses to show it to this key, whose role reads every row: a row the ledger holds is shown to every support, auditor and admin key, so the row was deleted or is withheld")
)

// enumWord turns ROW_STATUS_AUTHORIZED into "authorized", as leaves name
// closed-set values.
func enumWord(v fmt.Stringer, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(v.String(), prefix))
}

func stamp(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339Nano)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// diff appends "name is X in the row, Y in the leaf" when they differ.
func diff(out []string, leaf map[string]string, name, fromRow string) []string {
	if leaf[name] != fromRow {
		return append(out, fmt.Sprintf("%s is %q in the row, %q in the leaf", name, fromRow, leaf[name]))
	}
	return out
}

// rowDiffs compares a receipt or refusal leaf with its row and, when the
// row keeps its evidence, the evidence with the leaf and the row's fields
// with the evidence (evidenceDiffs).
func (a *auditor) rowDiffs(leaf map[string]string, r *ledgerv1.Row) ([]string, error) {
	var d []string
	kind := "receipt"
	if r.GetKind() == ledgerv1.RowKind_ROW_KIND_REFUSAL {
		kind = "refusal"
	}
	d = diff(d, leaf, "kind", kind)
	d = diff(d, leaf, "row", r.GetId())
	d = diff(d, leaf, "evidence", "sha256:"+r.GetEvidenceSha256())
	d = diff(d, leaf, "jwks", dash(r.GetBrandKey().GetJwksSnapshot())+" "+dash(r.GetAgent().GetJwksSnapshot()))
	d = diff(d, leaf, "grant", digest(r.GetGrantId()))
	d = diff(d, leaf, "status", enumWord(r.GetStatus(), "ROW_STATUS_"))
	d = diff(d, leaf, "class", enumWord(r.GetRetentionClass(), "RETENTION_CLASS_"))
	d = diff(d, leaf, "duplicate-of", dash(r.GetVerifier().GetDuplicateOf()))
	d = diff(d, leaf, "recorded", stamp(r.GetRecordedAt()))
	d = append(d, rowLeafLines(leaf, kind)...)
	if r.GetEvidenceNotKept() != "" {
		// Only a read-only receipt keeps no evidence (its receipt, tokens
		// and args are personal data): the leaf, which the row store
		// cannot change, says whether this row is one. Any other row
		// marked so hides the evidence its leaf commits to.
		if leaf["kind"] != "receipt" || leaf["class"] != "read_only" {
			d = append(d, fmt.Sprintf("the row says its evidence is not kept, but its leaf logs a %s of class %s: only a read-only receipt keeps none",
				dash(leaf["kind"]), dash(leaf["class"])))
		}
		return d, nil
	}
	ctx, cancel := a.c.ctx()
	defer cancel()
	ev, err := a.c.c.GetEvidence(ctx, &ledgerv1.GetEvidenceRequest{Id: r.GetId()})
	if err != nil {
		return nil, err
	}
	// The hash of the evidence as stored now, against the leaf's.
	if got := "sha256:" + ev.GetEvidenceSha256(); got != leaf["evidence"] {
		d = append(d, fmt.Sprintf("the stored evidence hashes to %s, the leaf says %s", got, leaf["evidence"]))
	}
	// The evidence hash above is the server's word. The evidence itself
	// is bound to the leaf here, and the row's fields compared with it.
	fields, err := a.evidenceDiffs(ctx, leaf, r, ev)
	if err != nil {
		return nil, err
	}
	return append(d, fields...), nil
}

// rowLeafLines names the lines of a row's leaf that the ledger does not
// write in a leaf of kind (receipt or refusal), and those it writes that
// the leaf lacks: a line of another name is read by no check, and a leaf
// without one commits to less than the ledger's. A line written twice is
// found when the leaf is read (read), or its proof verified.
func rowLeafLines(leaf map[string]string, kind string) []string {
	want := proof.LeafLines(kind)
	var unknown, missing []string
	for name := range leaf {
		if !slices.Contains(want, name) {
			unknown = append(unknown, name)
		}
	}
	for _, name := range want {
		if _, ok := leaf[name]; !ok {
			missing = append(missing, name)
		}
	}
	var d []string
	if len(unknown) > 0 {
		slices.Sort(unknown)
		d = append(d, fmt.Sprintf("the leaf has lines the ledger does not write in a %s leaf (%s)", kind, strings.Join(unknown, ", ")))
	}
	if len(missing) > 0 {
		d = append(d, fmt.Sprintf("the leaf lacks lines the ledger writes in every %s leaf (%s)", kind, strings.Join(missing, ", ")))
	}
	return d
}

// compare compares one leaf with what the key can read.
func (a *auditor) compare(index int64, data []byte) error {
	leaf := parseLeaf(string(data))
	id := leaf["row"]
	where := fmt.Sprintf("leaf %d (%s of row %s)", index, leaf["kind"], id)
	switch leaf["kind"] {
	case "receipt", "refusal", "dispute":
	case "incident-close":
		return a.compareIncident(index, leaf)
	case "revocation":
		a.noteRevocation(index, leaf)
		return nil
	case "policy":
		p := policyLeaf{index: index, periods: policyPeriods(leaf)}
		p.at, _ = time.Parse(time.RFC3339Nano, leaf["at"])
		if per, err := retention.ParsePeriod(leaf["dispute"]); err == nil && positive(per) {
			p.disputeHold, p.hasDispute = per, true
		}
		if pr := policyProblems(leaf); len(pr) > 0 {
			a.mismatch("leaf %d (policy %s) is not a policy the ledger writes: %s; the ledger starts only with a positive period for every class, so it did not write this leaf (a period that does not parse or is not positive is not used)",
				index, dash(leaf["policy"]), strings.Join(pr, "; "))
		}
		a.policies = append(a.policies, p)
		a.notRows++
		return nil
	default:
		a.notRows++
		return nil
	}
	r, tomb, err := a.row(id)
	switch {
	case errors.Is(err, errRowMissing):
		a.mismatch("%s: the ledger no longer holds row %s, and no retention sweep removed it", where, id)
		return nil
	case errors.Is(err, errUnreadable):
		a.mismatch("%s: row %s: %v", where, id, err)
		return nil
	case err != nil:
		return err
	case r == nil:
		if leaf["kind"] == "dispute" {
			a.sweptEvents = append(a.sweptEvents, sweptLeaf{index: index, leaf: leaf, tomb: *tomb})
			return nil
		}
		a.swept++
		a.tombs = append(a.tombs, sweptLeaf{index: index, leaf: leaf, tomb: *tomb})
		return nil
	}
	a.compared++
	var d []string
	if leaf["kind"] == "dispute" {
		n, err := strconv.Atoi(leaf["event"])
		evs := r.GetDisputeEvents()
		if err != nil || n < 0 || n >= len(evs) {
			a.mismatch("%s: row %s has no dispute event %s", where, id, leaf["event"])
			return nil
		}
		d = eventDiffs(leaf, evs[n])
		a.noteEvent(disputeRef(id, n), eventLeaf{index: index, leaf: leaf, compared: true})
	} else {
		a.seen[id] = true
		if d, err = a.rowDiffs(leaf, r); err != nil {
			return err
		}
		a.noteIncident(index, leaf, r)
	}
	if len(d) > 0 {
		a.mismatch("%s differs from the ledger: %s", where, strings.Join(d, "; "))
	}
	return nil
}

// eventDiffs compares a dispute leaf with the row's event.
func eventDiffs(leaf map[string]string, e *ledgerv1.DisputeEvent) []string {
	var d []string
	d = diff(d, leaf, "status", enumWord(e.GetStatus(), "DISPUTE_STATUS_"))
	d = diff(d, leaf, "note", digest(e.GetNote()))
	d = diff(d, leaf, "by", digest(e.GetBy()))
	d = diff(d, leaf, "at", stamp(e.GetAt()))
	return d
}

func (a *auditor) compareIncident(index int64, leaf map[string]string) error {
	a.closures[leaf["incident"]] = true
	a.closedAt[leaf["row"]] = closure{index: index, incident: leaf["incident"], at: leaf["at"]}
	ctx, cancel := a.c.ctx()
	defer cancel()
	rep, err := a.c.c.GetIncident(ctx, &ledgerv1.GetIncidentRequest{Id: leaf["incident"]})
	if st, _ := status.FromError(err); err != nil && st.Code() == codes.PermissionDenied {
		a.mismatch("leaf %d (closure of incident %s): the server refuses to show incident %s to this key, whose role reads every incident (the server says: %s)", index, leaf["incident"], leaf["incident"], st.Message())
		return nil
	} else if err != nil && st.Code() == codes.NotFound {
		a.mismatch("leaf %d (closure of incident %s): the ledger does not hold the incident", index, leaf["incident"])
		return nil
	} else if err != nil {
		return err
	}
	a.compared++
	if d := closureDiffs(leaf, rep.GetIncident()); len(d) > 0 {
		a.mismatch("leaf %d (closure of incident %s) differs from the ledger: %s", index, leaf["incident"], strings.Join(d, "; "))
	}
	return nil
}

// closureDiffs compares the leaf of an incident's closure with the
// incident the server holds.
func closureDiffs(leaf map[string]string, inc *ledgerv1.Incident) []string {
	var d []string
	d = diff(d, leaf, "row", inc.GetRowId())
	d = diff(d, leaf, "note", digest(inc.GetNote()))
	d = diff(d, leaf, "by", digest(inc.GetClosedBy()))
	d = diff(d, leaf, "at", stamp(inc.GetClosedAt()))
	if inc.GetOpen() {
		d = append(d, "the incident is open, the leaf records its closure")
	}
	return d
}

// incidentRow is a row whose leaf says status incident: the row names the
// incident it opened.
type incidentRow struct {
	row, incident string
	leaf          int64
}

// noteIncident keeps a row whose leaf says status incident, for
// checkIncidents.
func (a *auditor) noteIncident(index int64, leaf map[string]string, r *ledgerv1.Row) {
	if leaf["status"] == "incident" {
		a.incidentRows[r.GetId()] = incidentRow{row: r.GetId(), incident: r.GetIncidentId(), leaf: index}
	}
}

// checkIncidents asks the server for the incident of every row whose leaf
// says status incident: the leaf is the log's word that the row opened
// one, and an incident is never deleted, so an incident the server does
// not hold, or one naming another row, was edited in the row store. Each
// incident is compared with the leaf of its closure: read from the tiles
// above, or else through its proof (which must be of the audited log). An
// open incident has no such leaf; a closed one without a leaf after
// settle is a mismatch.
func (a *auditor) checkIncidents(key string, settle time.Duration) error {
	var pending []incidentRow
	byLeaf := slices.SortedFunc(maps.Values(a.incidentRows), func(x, y incidentRow) int { return cmp.Compare(x.leaf, y.leaf) })
	for _, ir := range byLeaf {
		done, err := a.checkIncident(ir, key)
		if err != nil {
			return err
		}
		if !done {
			pending = append(pending, ir)
		}
	}
	deadline := time.Now().Add(settle)
	for len(pending) > 0 && time.Now().Before(deadline) {
		if err := pause(context.Background(), 200*time.Millisecond); err != nil {
			return err
		}
		var still []incidentRow
		for _, ir := range pending {
			done, err := a.checkIncident(ir, key)
			if err != nil {
				return err
			}
			if !done {
				still = append(still, ir)
			}
		}
		pending = still
	}
	for _, ir := range pending {
		if held, ok := a.firstLeaf.get(closureRef(ir.incident)); ok {
			a.mismatch("row %s (leaf %d, status incident): the audited tree holds the closure of incident %s at leaf %d, but the server says it is not yet logged (after %s): a second leaf of it is queued, and an incident is closed once, so that leaf was queued outside the ledger", ir.row, ir.leaf, ir.incident, held, settle)
			continue
		}
		a.mismatch("row %s (leaf %d, status incident): incident %s is closed, but the log has no leaf of its closure (not logged within %s)", ir.row, ir.leaf, ir.incident, settle)
	}
	printf(a.c.out, "%d incident rows: each one's incident checked against the row and the closure in the log\n", len(a.incidentRows))
	return nil
}

// checkIncident checks one incident row's incident; false when the
// incident is closed and its closure is not (yet) in the log.
func (a *auditor) checkIncident(ir incidentRow, key string) (bool, error) {
	where := fmt.Sprintf("row %s (leaf %d, status incident)", ir.row, ir.leaf)
	if ir.incident == "" {
		a.mismatch("%s: the row names no incident", where)
		return true, nil
	}
	ctx, cancel := a.c.ctx()
	rep, err := a.c.c.GetIncident(ctx, &ledgerv1.GetIncidentRequest{Id: ir.incident})
	cancel()
	switch status.Code(err) {
	case codes.OK:
	case codes.PermissionDenied:
		a.mismatch("%s: the server refuses to show incident %s to this key, whose role reads every incident (the server says: %s)", where, ir.incident, status.Convert(err).Message())
		return true, nil
	case codes.NotFound:
		a.mismatch("%s: the ledger does not hold incident %s, which the row opened", where, ir.incident)
		return true, nil
	default:
		return false, fmt.Errorf("incident %s: %w", ir.incident, err)
	}
	inc := rep.GetIncident()
	if inc.GetRowId() != ir.row {
		a.mismatch("%s: incident %s names row %s, not this row", where, ir.incident, inc.GetRowId())
		return true, nil
	}
	// A closure the audited tree holds was compared with its leaf when
	// read; its proof is still asked for, for a second leaf of it logged
	// since (the server proves a closure at its latest leaf).
	compared := a.closures[ir.incident]
	held, inTree := a.firstLeaf.get(closureRef(ir.incident))
	ctx, cancel = a.c.ctx()
	pr, err := a.c.c.GetRowProof(ctx, &ledgerv1.GetRowProofRequest{Id: ir.row, Event: "incident-close"})
	cancel()
	switch {
	case inTree && notLogged(err):
		return false, nil
	case inTree && status.Code(err) == codes.NotFound:
		return true, nil // the incident reads open: found against its leaf when read
	case inTree && noLeaf(err):
		a.mismatch("%s: the audited tree holds the closure of incident %s at leaf %d, but the server has no leaf of it, and none is queued: the row store's record of that leaf was removed (the server says: %s)", where, ir.incident, held, status.Convert(err).Message())
		return true, nil
	case status.Code(err) == codes.NotFound || notLogged(err):
		return inc.GetOpen(), nil
	case noLeaf(err):
		a.mismatch("%s: incident %s is closed, but the log has no leaf of its closure, and none is queued (the server says: %s)", where, ir.incident, status.Convert(err).Message())
		return true, nil
	case err != nil:
		return false, fmt.Errorf("proof of the closure of incident %s: %w", ir.incident, err)
	}
	b, err := proof.ParseBundle([]byte(pr.GetBundle()))
	var cp proof.Checkpoint
	if err == nil {
		cp, err = b.Verify(key)
	}
	if err != nil {
		a.mismatch("%s: the proof of the closure of incident %s does not verify: %v", where, ir.incident, err)
		return true, nil
	}
	if err := a.inAuditedLog(b, cp); err != nil {
		var bad *inconsistent
		if !errors.As(err, &bad) {
			return false, err
		}
		a.mismatch("%s: the proof of the closure of incident %s is not of the audited log: %v", where, ir.incident, bad.err)
		return true, nil
	}
	leaf := parseLeaf(b.Leaf)
	if leaf["kind"] != "incident-close" || leaf["incident"] != ir.incident {
		a.mismatch("%s: the proof of the closure of incident %s is of leaf %d, a %s leaf of incident %q", where, ir.incident, b.LeafIndex, leaf["kind"], leaf["incident"])
		return true, nil
	}
	if inTree && b.LeafIndex >= a.newer.Size {
		a.mismatch("the closure of incident %s has two leaves, %d and %d: an incident is closed once, so leaf %d was queued outside the ledger, and the row store may have been changed to match it (the values leaf %d logged are what the ledger recorded; its proof is of leaf %d, logged since the audited tree of size %d)",
			ir.incident, held, b.LeafIndex, b.LeafIndex, held, b.LeafIndex, a.newer.Size)
		return true, nil
	}
	if compared {
		return true, nil
	}
	a.closures[ir.incident] = true
	if d := closureDiffs(leaf, inc); len(d) > 0 {
		a.mismatch("leaf %d (closure of incident %s) differs from the ledger: %s", b.LeafIndex, ir.incident, strings.Join(d, "; "))
	}
	return true, nil
}

// logAudit proves that a checkpoint kept earlier is a prefix of the latest
// (RFC 6962 consistency), reads every leaf since from the tiles, checked
// against the latest checkpoint, and compares each with the rows the key can
// read; it also checks that every readable row has a leaf.
// auditAudience is the audience the audit's verifier holds request JWTs
// to where a row does not say which it was held to (ledger.Reverify): a
// JWT that cannot be read, or whose check failed before its audience,
// fails on that again whatever the audience.
const auditAudience = "urn:pactledger:audit:the-audience-the-row-was-held-to"

// auditOpts are log audit's flags.
type auditOpts struct {
	from, logKey string
	settle       time.Duration
	all          bool
	retention    string // --retention: the periods by class, "" none
	bucket       bucketOpts
}

// forkedLog says what a log that does not continue the kept checkpoint
// proves, and what to do: the kept checkpoint verifies with the log's
// key, so the ledger signed it, and its log no longer extends it. The
// audit reads the ledger's own log, which no longer holds the leaves
// lost; fsck finds them only in write-once storage that was not rolled
// back too.
const forkedLog = "This proves the ledger's log is not an extension of a checkpoint the ledger signed earlier (the kept one verifies with the log's key): its history was rewritten or rolled back since, as when its row store, or its whole data directory, is restored from a backup older than the kept checkpoint. " +
	"Keep the kept checkpoint and this output: they are the evidence. Ask the operator what was restored and when, and which acknowledged rows were lost. " +
	"`ledgerctl fsck` (auditor or admin) compares the row store's log with the log published to write-once storage and lists each published leaf the row store lacks, with its row, but only when write-once storage was not rolled back with the row store: " +
	"a local evidence directory restored together with the data directory holds the same old log, and fsck then passes. The kept checkpoint, and any other checkpoint kept outside the ledger, is then the only witness of the leaves lost."

// divergedLog says what a ledger that answers that its log diverged from
// the published one tells of the kept checkpoint, and what to do.
const divergedLog = "So, as far as this audit can tell, the ledger's log is not an extension of the kept checkpoint: the ledger's own log is not an extension of the log it published to write-once storage, it signs no checkpoint of it, and the audit cannot check the kept checkpoint against a latest one. " +
	"A row store restored from a backup older than the published log does this (docs/operations.md, \"Backups\"). Keep the kept checkpoint and this output: they are the evidence. Ask the operator what was restored and when, and which acknowledged rows were lost. " +
	"`ledgerctl fsck` (auditor or admin) compares the row store's log with the published one and lists each published leaf the row store lacks, with its row."

// logAudit is `log audit`: auditLog, where a ledger that answers that its
// log diverged from the published one fails the check.
func (c *cli) logAudit(o auditOpts) error {
	err := c.auditLog(o)
	if !logDiverged(err) {
		return err
	}
	printf(c.out, "FAILED: the ledger serves no checkpoint or proof of its log: %s\n", status.Convert(err).Message())
	if kept, rerr := os.ReadFile(o.from); rerr == nil {
		key, _ := logKeyArg(o.logKey)
		switch cp, oerr := proof.Open(kept, key); {
		case key == "":
			printf(c.out, "kept checkpoint: %s, its signature not checked: the ledger reports no key while its log diverged; pass --log-key with the log's published verifier key to check it\n", o.from)
		case oerr != nil:
			printf(c.out, "kept checkpoint: %s does not verify with the key you gave: %v\n", o.from, oerr)
		default:
			printf(c.out, "kept checkpoint: %s size %d, root %s, verified with the key you gave\n", cp.Origin, cp.Size, rootText(cp.Hash))
		}
	}
	fmt.Fprintln(c.out, divergedLog)
	return errCheckFailed
}

// auditLog checks the log from the kept checkpoint o.from: the latest
// checkpoint extends it, and the leaves since agree with the rows.
func (c *cli) auditLog(o auditOpts) error {
	if o.from == "" {
		return usagef("log audit --from OLD_CHECKPOINT_FILE [--log-key KEY] [--all] [--settle DURATION] [--retention PERIODS]")
	}
	key, err := logKeyArg(o.logKey)
	if err != nil {
		return err
	}
	periods, err := parseRetention(o.retention)
	if err != nil {
		return err
	}
	oldSigned, err := os.ReadFile(o.from)
	if err != nil {
		return fmt.Errorf("read the kept checkpoint: %w", err)
	}
	var bucket *s3.Store
	if o.bucket.given() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		bucket, err = c.openBucket(ctx, o.bucket)
		cancel()
		if errors.Is(err, s3.ErrNoObjectLock) {
			printf(c.out, "FAILED: %v: whoever may delete in it can remove the log it holds, so it witnesses nothing\n", err)
			return errCheckFailed
		}
		if err != nil {
			return err
		}
	}
	// The bucket before the ledger's latest checkpoint: ledgerd signs a
	// tree before it publishes it, so a publication between the two
	// reads leaves the bucket behind what the audit holds it to, never
	// ahead.
	var witness *bucketWitness
	if bucket != nil {
		witness = &bucketWitness{}
		if err := witness.read(c, bucket, o.bucket.bucket, keptSize(oldSigned), o.all, o.settle); err != nil {
			return err
		}
	}
	_, newer, used, err := c.latest(key)
	if err != nil {
		return err
	}
	old, err := proof.Open(oldSigned, used)
	if err != nil {
		printf(c.out, "FAILED: the kept checkpoint %s does not verify with %s: %v\n", o.from, keySource(key != ""), err)
		return errCheckFailed
	}
	printf(c.out, "kept checkpoint: %s size %d, root %s\n", old.Origin, old.Size, rootText(old.Hash))
	printf(c.out, "latest:          %s size %d, root %s\n", newer.Origin, newer.Size, rootText(newer.Hash))
	printf(c.out, "both verified with %s\n", keySource(key != ""))
	if old.Size > newer.Size {
		printf(c.out, "FAILED: the log shrank from %d to %d leaves\n", old.Size, newer.Size)
		fmt.Fprintln(c.out, forkedLog)
		return errCheckFailed
	}
	if err := c.consistent(old, newer); err != nil {
		var bad *inconsistent
		if errors.As(err, &bad) {
			printf(c.out, "FAILED: %v\n", bad.err)
			fmt.Fprintln(c.out, forkedLog)
			return errCheckFailed
		}
		return err
	}
	printf(c.out, "consistent: the tree of size %d is a prefix of the tree of size %d (RFC 6962 consistency proof checked)\n", old.Size, newer.Size)

	// The leaves from the tiles, each checked against the latest
	// checkpoint's tree.
	tr := &tiles{base: c.restBase(), client: tileClient(c.timeout, c.tlsConf)}
	hashes := tlog.TileHashReader(tlog.Tree{N: newer.Size, Hash: newer.Hash}, tr)
	v, err := verifier.New(verifier.Config{Audience: auditAudience, CheckedBy: "ledgerctl log audit"})
	if err != nil {
		return err
	}
	a := &auditor{c: c, verifier: v, rows: map[string]*ledgerv1.Row{}, seen: map[string]bool{}, newer: newer, hashes: hashes, extends: map[proof.Checkpoint]bool{},
		incidentRows: map[string]incidentRow{}, incidentLeaves: map[string]incidentLeaf{}, tombstones: map[string]*tombstone{}, closures: map[string]bool{}, closedAt: map[string]closure{}, eventLeaves: map[string]eventLeaf{}, firstLeaf: leafIndex{}}
	a.bucket = witness
	checkRows := c.key != ""
	var leaves, before int64
	first := old.Size // --all: every leaf is compared, not only those since the kept checkpoint
	if o.all {
		first = 0
	}

	a.ordered = first
	// Every leaf is read, those before first too: the tiles are public,
	// so with or without a key, for a second leaf of a row, event or
	// closure logged before first (read), and with a key for the presence
	// of their rows and the rows' events (checkRowsPresent, checkEvents).
	// Two tile reads for every 256 leaves, where with a key the rows each
	// cost a proof and an evidence read. The loop is bounded by the
	// latest checkpoint's size, which proof.Open holds to proof.MaxSize
	// (2^48 leaves: 2^40 tiles, n<<tileHeight far from overflowing).
	for n := int64(0); n<<tileHeight < newer.Size; n++ {
		start, end := n<<tileHeight, min((n+1)<<tileHeight, newer.Size)
		data, err := tr.entries(n, int(end-start))
		var fetch *fetchError
		if errors.As(err, &fetch) {
			return err
		}
		if err != nil {
			printf(c.out, "FAILED: the leaves at %s: %v\n", tr.base, err)
			return errCheckFailed
		}
		idx := make([]int64, 0, end-start)
		for i := start; i < end; i++ {
			idx = append(idx, tlog.StoredHashIndex(0, i))
		}
		hs, err := hashes.ReadHashes(idx)
		if errors.As(err, &fetch) {
			return err
		}
		if err != nil {
			printf(c.out, "FAILED: the tiles at %s do not match the latest checkpoint: %v\n", tr.base, err)
			return errCheckFailed
		}
		if err := a.compareTile(n, hs); err != nil {
			return err
		}
		for i := start; i < end; i++ {
			leaf := data[i-start]
			if tlog.RecordHash(leaf) != hs[i-start] {
				a.mismatch("leaf %d in the entry bundle does not hash to the tree's leaf %d", i, i)
				continue
			}
			a.read(i, leaf)
			if i < first {
				before++
				if !checkRows {
					continue
				}
				if err := a.note(i, leaf); err != nil {
					return err
				}
				continue
			}
			leaves++
			if checkRows {
				if err := a.compare(i, leaf); err != nil {
					return err
				}
			}
		}
	}
	printf(c.out, "%d leaves since size %d read from the tiles at %s/v1/log/ and checked against the latest checkpoint\n", leaves, first, tr.base)
	if before > 0 && !checkRows {
		printf(c.out, "%d leaves before size %d read too, for a second leaf of a row, dispute event or incident closure logged before the kept checkpoint\n", before, first)
	} else if before > 0 {
		printf(c.out, "%d leaves before size %d read too: each row leaf's row checked to be still held (or swept with a tombstone), each dispute leaf against its row's event, each incident closure against its incident; the rows logged before are compared with their leaves through their proofs below (--all compares every leaf as read from the tiles)\n", before, first)
	}
	if !checkRows {
		fmt.Fprintln(c.out, "rows not compared: no API key (pass a support, auditor or admin key to compare each leaf with its row)")
	} else {
		if err := a.everyRowHasALeaf(used, o.settle); err != nil {
			return err
		}
		if err := a.checkRowsPresent(); err != nil {
			return err
		}
		if err := a.checkEvents(used, o.settle); err != nil {
			return err
		}
		if err := a.checkIncidents(used, o.settle); err != nil {
			return err
		}
		if err := a.checkRevocations(); err != nil {
			return err
		}
		if err := a.checkLookups(o.all); err != nil {
			return err
		}
		a.checkPolicies(periods)
		a.checkTombstones(periods, time.Now().UTC())
		a.checkSweptDisputes()
		printf(c.out, "rows: %d leaves compared with the ledger, %d rows swept by retention (their leaves stand), %d other leaves\n",
			a.compared, a.swept, a.notRows)
		printf(c.out, "checks run again here: %d rows, their signatures with the keys of the JWKS snapshots their leaves name (read-only rows keep no evidence to run them on)\n", a.reverified)
		a.printKeys()
		printf(c.out, "dispute events the rows show: %d checked against their leaves in the audited tree, %d against leaves logged since (through their proofs), %d not yet checkable\n",
			a.events.inTree, a.events.since, len(a.notYet))
		for _, e := range a.notYet {
			printf(c.out, "not yet checkable: %s\n", e)
		}
	}
	if err := a.finishBucket(old, used, key != ""); err != nil {
		return err
	}
	for _, m := range a.mismatches {
		printf(c.out, "MISMATCH %s\n", m)
	}
	if len(a.mismatches) > 0 {
		if a.bucketFailed {
			fmt.Fprintln(c.out, splitView)
		}
		printf(c.out, "audit FAILED: %d mismatches%s\n", len(a.mismatches), a.uncheckedWords())
		return errCheckFailed
	}
	fmt.Fprintln(c.out, a.passed(checkRows))
	return nil
}

// passed is the last line of an audit without mismatches: what was
// checked, and only that.
func (a *auditor) passed(checkRows bool) string {
	bucket := ""
	if a.bucket != nil {
		bucket = ", extends the log in its bucket"
	}
	if !checkRows {
		return "audit passed: the log only grew" + bucket + "; rows were not compared (no API key)"
	}
	line := "audit passed: the log only grew" + bucket + ", and every row and event compared matches its leaf"
	if len(a.notYet) > 0 {
		line += fmt.Sprintf("; %d events not yet in the log were not checked (audit again later)", len(a.notYet))
	}
	return line + a.uncheckedWords()
}

// uncheckedWords ends the verdict of an audit that did not look up every
// row logged before the kept checkpoint and no longer listed
// (checkRowsPresent): how many such rows it did not check were swept by
// retention and not deleted, and that --all checks them.
func (a *auditor) uncheckedWords() string {
	if a.unchecked == 0 {
		return ""
	}
	return fmt.Sprintf("; NOT CHECKED: %d rows logged before the kept checkpoint and no longer listed were not looked up, so whether each was swept by retention or deleted is unknown (run again with --all to check them)", a.unchecked)
}

// everyRowHasALeaf lists every row the key can read and checks each one
// not compared above against its own leaf (through its proof bundle,
// verified with key). A row the log does not hold after settle (the
// integrator extends the log every half second) is a mismatch: a row
// inserted without its leaf. A row compared above is asked for its proof
// too, for a second leaf logged since the audited tree (rowLeaf).
func (a *auditor) everyRowHasALeaf(key string, settle time.Duration) error {
	var pending []string
	readable := 0
	token := ""
	tokens := map[string]bool{}
	maxRows, maxEmpty := listBounds(a.newer.Size)
	empty := 0
	for pages := 1; ; pages++ {
		ctx, cancel := a.c.ctx()
		rep, err := a.c.c.ListRows(ctx, &ledgerv1.ListRowsRequest{PageSize: listPageSize, PageToken: token})
		cancel()
		if err != nil {
			return fmt.Errorf("list rows: %w", err)
		}
		for _, r := range rep.GetRows() {
			readable++
			a.rows[r.GetId()] = r
			a.listed = append(a.listed, r.GetId())
			ok, err := a.rowLeaf(r, key)
			if err != nil {
				return err
			}
			if !ok {
				pending = append(pending, r.GetId())
			}
		}
		if len(rep.GetRows()) == 0 {
			empty++
		}
		if token = rep.GetNextPageToken(); token == "" {
			break
		}
		if int64(readable) > maxRows || empty > maxEmpty {
			printf(a.c.out, "FAILED: the server's listing of rows goes on past what the log can hold (%d rows and %d empty pages in %d pages, where the audited tree has %d leaves, each row one of them, and a page without rows reads 10,000 index entries): a server that keeps giving a next page would keep the audit running for ever\n",
				readable, empty, pages, a.newer.Size)
			return errCheckFailed
		}
		if tokens[token] {
			printf(a.c.out, "FAILED: the server's listing of rows gave page token %q a second time (page %d): it would list the same rows again for ever\n", token, pages)
			return errCheckFailed
		}
		tokens[token] = true
	}
	deadline := time.Now().Add(settle)
	for len(pending) > 0 && time.Now().Before(deadline) {
		if err := pause(context.Background(), 200*time.Millisecond); err != nil {
			return err
		}
		var still []string
		for _, id := range pending {
			ok, err := a.rowLeaf(a.rows[id], key)
			if err != nil {
				return err
			}
			if !ok {
				still = append(still, id)
			}
		}
		pending = still
	}
	for _, id := range pending {
		if first, ok := a.firstLeaf.get(id); ok {
			a.mismatch("row %s: the audited tree holds its leaf %d, but the server says the row is not yet logged (after %s): a second leaf of it is queued, and a row is logged once, so that leaf was queued outside the ledger", id, first, settle)
			continue
		}
		a.mismatch("row %s: the ledger holds it but the log has no leaf for it (not logged within %s)", id, settle)
	}
	printf(a.c.out, "%d readable rows: each checked for a leaf of its own\n", readable)
	return nil
}

// listPageSize is the page size everyRowHasALeaf lists rows with.
const listPageSize = 1000

// listSlack is how many rows recorded since the audited tree the listing
// may hold beyond its leaves: the rows a busy ledger records while the
// audit lists.
const listSlack = 1 << 20

// listBounds bounds the listing everyRowHasALeaf reads from a log of
// size leaves: each row has a leaf, so the rows are at most the audited
// tree's leaves and listSlack more; and a page holds at least one row
// unless it read 10,000 index entries (one a row), so the pages without
// rows are at most a ten-thousandth of those, and a few.
func listBounds(size int64) (rows int64, empty int) {
	rows = min(size, 1<<48) + listSlack
	return rows, int(rows/10000) + 16
}

// maxPresenceChecks bounds the rows checkRowsPresent looks up one by one.
const maxPresenceChecks = 1000

// checkRowsPresent checks that the ledger still holds the row of every
// receipt and refusal leaf read before those compared with the ledger
// (listed by everyRowHasALeaf, or else answered as swept): a row deleted
// from the row store is a mismatch however old its leaf. A swept row's
// tombstone is checked as a compared one's is.
//
// Rows swept by retention pile up with time, and each costs a read of its
// own (a read on record in the access log): it checks the newest
// maxPresenceChecks not listed, and says how many older ones it left to
// --all, which compares every leaf with its row.
func (a *auditor) checkRowsPresent() error {
	checked, left := 0, 0
	defer func() {
		a.unchecked = left
		if left > 0 {
			printf(a.c.out, "%d older rows logged before the kept checkpoint and no longer listed (swept, or deleted) were not looked up one by one: --all checks each\n", left)
		}
	}()
	for i := len(a.older) - 1; i >= 0; i-- {
		l := a.older[i]
		if _, ok := a.rows[l.id]; ok {
			continue
		}
		if checked >= maxPresenceChecks {
			left++
			continue
		}
		checked++
		_, tomb, err := a.row(l.id)
		switch {
		case errors.Is(err, errRowMissing):
			a.mismatch("leaf %d (%s of row %s): the ledger no longer holds row %s, and no retention sweep removed it", l.index, l.kind, l.id, l.id)
		case errors.Is(err, errUnreadable):
			a.mismatch("leaf %d (%s of row %s): row %s: %v", l.index, l.kind, l.id, l.id, err)
		case err != nil:
			return err
		case tomb != nil:
			a.swept++
			leaf := map[string]string{"kind": l.kind, "row": l.id, "class": l.class, "status": l.status, "recorded": l.recorded}
			a.tombs = append(a.tombs, sweptLeaf{index: l.index, leaf: leaf, tomb: *tomb, grant: l.grant})
		}
	}
	return nil
}

// checkEvents checks every dispute event the rows read show against its
// leaf: read from the tiles (every leaf of the audited tree is read), or,
// for an event the tree does not hold, through its proof, which must be of
// a tree extending the audited one. An event the ledger says has no leaf
// and none queued is a mismatch. One the server says is not yet logged
// (after settle) is not yet checkable when it was recorded after the
// audited tree's latest leaf (less eventSkew), and a mismatch otherwise:
// the log takes leaves in commit order, so an event recorded before a
// leaf the tree holds is in the tree. It also finds a dispute leaf read
// before those compared whose row no longer shows the event.
//
// An event the tree holds is asked for its proof too: every leaf of the
// audited tree was read, so a second leaf of it within the tree was found
// then, and one logged since is found here, as the server proves an event
// at its latest leaf. The server saying it is not yet logged (after
// settle) is a mismatch then: a second leaf of it is queued.
func (a *auditor) checkEvents(key string, settle time.Duration) error {
	type pendingEvent struct {
		r    *ledgerv1.Row
		n    int
		held *eventLeaf
	}
	var pending []pendingEvent
	for _, id := range slices.Sorted(maps.Keys(a.rows)) {
		r := a.rows[id]
		for n, e := range r.GetDisputeEvents() {
			ref := disputeRef(id, n)
			var held *eventLeaf
			if l, ok := a.eventLeaves[ref]; ok {
				if !l.compared {
					if d := eventDiffs(l.leaf, e); len(d) > 0 {
						a.mismatch("leaf %d (dispute of row %s) differs from the ledger: %s", l.index, id, strings.Join(d, "; "))
					}
				}
				a.events.inTree++
				held = &l
			}
			done, err := a.eventProof(r, n, key, held)
			if err != nil {
				return err
			}
			if !done {
				pending = append(pending, pendingEvent{r, n, held})
			}
		}
	}
	for _, l := range slices.SortedFunc(maps.Values(a.eventLeaves), func(x, y eventLeaf) int { return cmp.Compare(x.index, y.index) }) {
		if r, ok := a.rows[l.leaf["row"]]; ok && !l.compared {
			if n, _ := strconv.Atoi(l.leaf["event"]); n >= len(r.GetDisputeEvents()) {
				a.mismatch("leaf %d (dispute of row %s): row %s has no dispute event %s", l.index, r.GetId(), r.GetId(), l.leaf["event"])
			}
		}
	}
	deadline := time.Now().Add(settle)
	for len(pending) > 0 && time.Now().Before(deadline) {
		if err := pause(context.Background(), 200*time.Millisecond); err != nil {
			return err
		}
		var still []pendingEvent
		for _, p := range pending {
			done, err := a.eventProof(p.r, p.n, key, p.held)
			if err != nil {
				return err
			}
			if !done {
				still = append(still, p)
			}
		}
		pending = still
	}
	for _, p := range pending {
		e := p.r.GetDisputeEvents()[p.n]
		what := eventWords(p.r, p.n)
		if p.held != nil {
			a.mismatch("%s: the audited tree holds its leaf %d, but the server says the event is not yet logged (after %s): a second leaf of it is queued, and an event is logged once, so that leaf was queued outside the ledger",
				what, p.held.index, settle)
			continue
		}
		if at := e.GetAt().AsTime(); !a.latest.IsZero() && at.Add(eventSkew).Before(a.latest) {
			a.mismatch("%s has no leaf in the log up to size %d, though leaf %d, recorded %s, is in it: the log takes leaves in the order they commit, so the event was not recorded when it says (the server says it is not yet logged)",
				what, a.newer.Size, a.latestLeaf, a.latest.Format(time.RFC3339Nano))
			continue
		}
		a.notYet = append(a.notYet, fmt.Sprintf("%s is not yet in the log: recorded after, or within %s of, the audited tree's latest leaf (%s), it may still be on its way; audit again later", what, eventSkew, dashTime(a.latest)))
	}
	return nil
}

// eventWords names the n-th dispute event of row r, with its status and
// time.
func eventWords(r *ledgerv1.Row, n int) string {
	e := r.GetDisputeEvents()[n]
	return fmt.Sprintf("dispute event %d of row %s (%s, at %s)", n, r.GetId(), enumWord(e.GetStatus(), "DISPUTE_STATUS_"), stamp(e.GetAt()))
}

func dashTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}

// eventProof checks the n-th dispute event of row r through its proof;
// false when the server says it is not yet logged. held is the event's
// leaf in the audited tree, already compared with the event (nil when the
// tree holds none): its proof is then checked to be of that leaf, and a
// proof of a leaf logged since is a second leaf of the event.
func (a *auditor) eventProof(r *ledgerv1.Row, n int, key string, held *eventLeaf) (bool, error) {
	what := eventWords(r, n)
	ctx, cancel := a.c.ctx()
	rep, err := a.c.c.GetRowProof(ctx, &ledgerv1.GetRowProofRequest{Id: r.GetId(), Event: "dispute/" + strconv.Itoa(n)})
	cancel()
	switch {
	case notLogged(err):
		return false, nil
	case noLeaf(err) && held != nil:
		a.mismatch("%s: the audited tree holds its leaf %d, but the server says it has no leaf in the log, and none is queued: the row store's record of that leaf was removed (the server says: %s)", what, held.index, status.Convert(err).Message())
		return true, nil
	case noLeaf(err):
		a.mismatch("%s has no leaf in the log, and none is queued: the row store holds an event the ledger did not record (the server says: %s)", what, status.Convert(err).Message())
		return true, nil
	case status.Code(err) == codes.NotFound:
		a.mismatch("%s: the row shows it, but the server has no proof of it: %s", what, status.Convert(err).Message())
		return true, nil
	case status.Code(err) == codes.PermissionDenied:
		a.mismatch("%s: the server refuses this key, whose role reads every row, its proof (the server says: %s)", what, status.Convert(err).Message())
		return true, nil
	case err != nil:
		return false, fmt.Errorf("proof of %s: %w", what, err)
	}
	b, err := proof.ParseBundle([]byte(rep.GetBundle()))
	var cp proof.Checkpoint
	if err == nil {
		cp, err = b.Verify(key)
	}
	if err != nil {
		a.mismatch("%s: its proof does not verify: %v", what, err)
		return true, nil
	}
	if err := a.inAuditedLog(b, cp); err != nil {
		var bad *inconsistent
		if !errors.As(err, &bad) {
			return false, err
		}
		a.mismatch("%s: its proof is not of the audited log: %v", what, bad.err)
		return true, nil
	}
	leaf := parseLeaf(b.Leaf)
	if leaf["kind"] != "dispute" || leaf["row"] != r.GetId() || leaf["event"] != strconv.Itoa(n) {
		a.mismatch("%s: its proof is of leaf %d, a %s leaf of row %s event %q", what, b.LeafIndex, leaf["kind"], leaf["row"], leaf["event"])
		return true, nil
	}
	if held != nil {
		// A second leaf within the audited tree was found when read.
		if b.LeafIndex != held.index && b.LeafIndex >= a.newer.Size {
			a.mismatch("dispute event %d of row %s has two leaves, %d and %d: an event is logged once, so leaf %d was queued outside the ledger, and the row store may have been changed to match it (the values leaf %d logged are what the ledger recorded; its proof is of leaf %d, logged since the audited tree of size %d)",
				n, r.GetId(), held.index, b.LeafIndex, b.LeafIndex, held.index, b.LeafIndex, a.newer.Size)
		}
		return true, nil
	}
	a.events.since++
	if d := eventDiffs(leaf, r.GetDisputeEvents()[n]); len(d) > 0 {
		a.mismatch("leaf %d (dispute of row %s) differs from the ledger: %s", b.LeafIndex, r.GetId(), strings.Join(d, "; "))
	}
	return true, nil
}

// rowLeaf checks a row against its leaf through its proof bundle; false
// when the row is not (yet) in the log. A row already compared with its
// leaf as read from the tiles is not compared again: its proof is checked
// to be of that leaf, or of a second one logged since the audited tree.
func (a *auditor) rowLeaf(r *ledgerv1.Row, key string) (bool, error) {
	compared := a.seen[r.GetId()]
	ctx, cancel := a.c.ctx()
	rep, err := a.c.c.GetRowProof(ctx, &ledgerv1.GetRowProofRequest{Id: r.GetId()})
	cancel()
	if notLogged(err) {
		return false, nil
	}
	first, held := a.firstLeaf.get(r.GetId())
	if noLeaf(err) && held {
		a.seen[r.GetId()] = true
		a.mismatch("row %s: the audited tree holds its leaf %d, but the server says it has no leaf in the log, and none is queued: the row store's record of that leaf was removed (the server says: %s)", r.GetId(), first, status.Convert(err).Message())
		return true, nil
	}
	if noLeaf(err) {
		a.seen[r.GetId()] = true
		a.mismatch("row %s: the ledger holds it but the log has no leaf for it, and none is queued (the server says: %s)", r.GetId(), status.Convert(err).Message())
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("proof of row %s: %w", r.GetId(), err)
	}
	b, err := proof.ParseBundle([]byte(rep.GetBundle()))
	var cp proof.Checkpoint
	if err == nil {
		cp, err = b.Verify(key)
	}
	if err != nil {
		a.mismatch("row %s: its proof does not verify: %v", r.GetId(), err)
		return true, nil
	}
	if err := a.inAuditedLog(b, cp); err != nil {
		var bad *inconsistent
		if !errors.As(err, &bad) {
			return false, err
		}
		a.mismatch("row %s: its proof is not of the audited log: %v", r.GetId(), bad.err)
		return true, nil
	}
	a.seen[r.GetId()] = true
	// Every leaf of the audited tree is read when rows are compared: a
	// second leaf of the row within it was found when read, and one past
	// it is found here, as the server proves a row at its latest leaf.
	if held && b.LeafIndex >= a.newer.Size {
		a.mismatch("row %s has two leaves, %d and %d: a row is logged once, so leaf %d was queued outside the ledger, and the row store may have been changed to match it (the values leaf %d logged are what the ledger recorded; its proof is of leaf %d, logged since the audited tree of size %d)",
			r.GetId(), first, b.LeafIndex, b.LeafIndex, first, b.LeafIndex, a.newer.Size)
	}
	if compared {
		return true, nil
	}
	leaf := parseLeaf(b.Leaf)
	d, err := a.rowDiffs(leaf, r)
	if err != nil {
		return false, err
	}
	a.noteIncident(b.LeafIndex, leaf, r)
	if len(d) > 0 {
		a.mismatch("leaf %d (row %s) differs from the ledger: %s", b.LeafIndex, r.GetId(), strings.Join(d, "; "))
	}
	return true, nil
}

// inconsistent: a proof that does not tie one tree to another. The
// server answered, and what it answered fails the check.
type inconsistent struct{ err error }

func (e *inconsistent) Error() string { return e.err.Error() }

// consistent fetches the RFC 6962 consistency proof from old to newer
// (both opened, of the same log) and checks it. A proof that fails, or
// that the server cannot give, is an *inconsistent; other errors are the
// server's.
func (c *cli) consistent(old, newer proof.Checkpoint) error {
	ctx, cancel := c.ctx()
	cons, err := c.c.GetConsistencyProof(ctx, &ledgerv1.GetConsistencyProofRequest{From: old.Size, To: newer.Size})
	cancel()
	if status.Code(err) == codes.InvalidArgument || status.Code(err) == codes.OutOfRange {
		return &inconsistent{fmt.Errorf("the server gives no consistency proof from size %d to %d: %v", old.Size, newer.Size, status.Convert(err).Message())}
	}
	if err != nil {
		return err
	}
	path := make([]tlog.Hash, len(cons.GetProof()))
	for i, h := range cons.GetProof() {
		if len(h) != tlog.HashSize {
			return &inconsistent{fmt.Errorf("consistency proof hash %d is %d bytes", i, len(h))}
		}
		copy(path[i][:], h)
	}
	if err := proof.VerifyConsistency(old, newer, path); err != nil {
		return &inconsistent{err}
	}
	return nil
}

// closure is the leaf of an incident's closure, as read from the tiles.
type closure struct {
	index        int64
	incident, at string
}

// sweptLeaf is the leaf of a receipt or refusal row the server answers as
// swept, with the server's tombstone.
type sweptLeaf struct {
	index int64
	leaf  map[string]string
	tomb  tombstone
	grant [16]byte // grantKey of the leaf's grant line, when leaf lacks it (checkRowsPresent)
}

// incidentLeaf is the leaf of a row that opened an incident (status
// incident), as read from the tiles: its grant line and when it was
// recorded, which is when its incident opened.
type incidentLeaf struct {
	index      int64
	row, grant string
	recorded   time.Time
}

// policyLeaf is a policy leaf read from the tiles: the retention periods
// a ledger started with, by class name, and the period a dispute event
// keeps its row (disputeHold; hasDispute is false for a ledger that did
// not keep disputed rows so).
type policyLeaf struct {
	index       int64
	at          time.Time // the leaf's at line; zero when it does not parse
	periods     map[string]retention.Period
	disputeHold retention.Period
	hasDispute  bool
}

// policyClasses are the classes a policy leaf records a period for.
var policyClasses = []retention.Class{retention.MoneyMoved, retention.AccountChanged, retention.ReadOnly, retention.Refused, retention.Incident}

// policyPeriods are the periods a policy leaf's lines record, by class
// name; a line that does not parse, or whose period is not positive, is
// left out (policyProblems finds it): the ledger only starts with a
// positive period for every class (retention.Policy.Validate).
func policyPeriods(leaf map[string]string) map[string]retention.Period {
	out := map[string]retention.Period{}
	for _, c := range policyClasses {
		if per, err := retention.ParsePeriod(leaf[c.String()]); err == nil && positive(per) {
			out[c.String()] = per
		}
	}
	return out
}

func positive(p retention.Period) bool { return p.Months >= 0 && p.Days >= 0 && p.Months+p.Days > 0 }

// policyLines are the lines of a policy leaf besides the classes': the
// dispute line is absent from a ledger's that did not keep disputed rows
// past their events.
var policyLines = []string{"kind", "policy", "at", "dispute"}

// policyProblems says what is wrong with a policy leaf the ledger would
// not have written: a class without its line, a period that does not
// parse or is not positive (the ledger starts with a positive period for
// every class, or not at all), or a line of another name.
func policyProblems(leaf map[string]string) []string {
	var p []string
	for _, c := range policyClasses {
		v, ok := leaf[c.String()]
		if !ok {
			p = append(p, fmt.Sprintf("it has no %s line", c))
			continue
		}
		per, err := retention.ParsePeriod(v)
		switch {
		case err != nil:
			p = append(p, fmt.Sprintf("its %s line %q is no period", c, v))
		case !positive(per):
			p = append(p, fmt.Sprintf("its %s period %q is not positive", c, v))
		}
	}
	if v, ok := leaf["dispute"]; ok {
		if per, err := retention.ParsePeriod(v); err != nil || !positive(per) {
			p = append(p, fmt.Sprintf("its dispute line %q is no positive period", v))
		}
	}
	var unknown []string
	for name := range leaf {
		if !slices.Contains(policyLines, name) && !slices.ContainsFunc(policyClasses, func(c retention.Class) bool { return c.String() == name }) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		p = append(p, fmt.Sprintf("it has lines a policy leaf does not have (%s)", strings.Join(unknown, ", ")))
	}
	return p
}

// checkPolicies finds every period a policy leaf logs that is shorter
// than the one given with --retention for its class: the business
// published the longer one, so a ledger that started with the shorter
// kept rows less than it said. checkTombstones still counts a swept row's
// period with the shorter (a row swept under it is no finding of its
// own): the policy is the finding.
func (a *auditor) checkPolicies(given map[string]retention.Period) {
	for _, p := range a.policies {
		for _, c := range policyClasses {
			want, ok := given[c.String()]
			got, logged := p.periods[c.String()]
			if !ok || !logged {
				continue
			}
			from := p.at
			if from.IsZero() {
				from = time.Now().UTC()
			}
			if got.After(from).Before(want.After(from)) {
				a.mismatch("leaf %d (policy): the ledger started keeping %s rows %s, shorter than the %s given with --retention as the business's published period: rows of the class may have been swept before the published period",
					p.index, c, got, want)
			}
		}
	}
}

// periodsBefore are the periods of class the policy leaves before leaf
// index record, and the --retention period of class, each with where it
// comes from.
func (a *auditor) periodsBefore(index int64, class string, given map[string]retention.Period) (pers []retention.Period, from []string) {
	for _, p := range a.policies {
		if per, ok := p.periods[class]; ok && p.index < index && !slices.Contains(pers, per) {
			pers, from = append(pers, per), append(from, fmt.Sprintf("the policy of leaf %d", p.index))
		}
	}
	if per, ok := given[class]; ok {
		pers, from = append(pers, per), append(from, "--retention")
	}
	return pers, from
}

// sweepSkew is how far ahead of the audit's clock a tombstone's sweep
// time may be: the server's clock.
const sweepSkew = 5 * time.Minute

// checkTombstones prints each swept row's leaf class and recording time
// beside its tombstone, and finds what the tombstone proves against the
// leaf (which the row store cannot change) with no retention policy: a
// class or status other than the leaf's, a sweep before its own
// retain-until or after the audit's clock, a retain-until before the row
// was recorded, or an incident's row swept before the incident's closure
// in the log. A row retained or swept before its class's period from its
// recording (for an incident's row, the incident period from the closure
// read from the tiles) is a finding too, against the shortest of the
// periods the policy leaves read before the row's leaf (the closure's)
// record and the one given with --retention: the shorter wins, so
// neither a period lengthened since nor a longer --retention makes a row
// swept under the shorter one a finding. Every leaf of the audited tree
// is read when rows are compared, so every policy leaf is.
func (a *auditor) checkTombstones(periods map[string]retention.Period, now time.Time) {
	for _, s := range a.tombs {
		f, t := s.leaf, s.tomb
		id := f["row"]
		printf(a.c.out, "swept: row %s (leaf %d): leaf class %s, recorded %s; tombstone class %s, status %s, retain-until %s, swept-at %s\n",
			id, s.index, f["class"], f["recorded"], dash(t.class), dash(t.status), dash(t.retainUntil), dash(t.sweptAt))
		var p []string
		if t.class != "" && t.class != f["class"] {
			p = append(p, fmt.Sprintf("swept as class %q, the leaf says %q", t.class, f["class"]))
		}
		if t.status != "" && t.status != f["status"] {
			p = append(p, fmt.Sprintf("swept as status %q, the leaf says %q", t.status, f["status"]))
		}
		recorded, rerr := time.Parse(time.RFC3339Nano, f["recorded"])
		until, uerr := time.Parse(time.RFC3339, t.retainUntil)
		swept, serr := time.Parse(time.RFC3339, t.sweptAt)
		recorded = recorded.Truncate(time.Second) // the tombstone's times are in seconds
		if uerr == nil && serr == nil && swept.Before(until) {
			p = append(p, fmt.Sprintf("swept on %s, before its own retain-until %s", t.sweptAt, t.retainUntil))
		}
		if rerr == nil && uerr == nil && until.Before(recorded) {
			p = append(p, fmt.Sprintf("retained until %s, before the row was recorded (%s)", t.retainUntil, f["recorded"]))
		}
		if serr == nil && swept.After(now.Add(sweepSkew)) {
			p = append(p, fmt.Sprintf("swept on %s, after the time of this audit (%s)", t.sweptAt, now.Format(time.RFC3339)))
		}
		start, from, before := recorded, f["recorded"], s.index
		if c, ok := a.closedAt[id]; ok {
			if at, err := time.Parse(time.RFC3339Nano, c.at); err == nil {
				if serr == nil && swept.Before(at.Truncate(time.Second)) {
					p = append(p, fmt.Sprintf("swept on %s, before leaf %d closed its incident %s (%s)", t.sweptAt, c.index, c.incident, c.at))
				}
				if f["class"] == "incident" {
					start, from, before = at.Truncate(time.Second), c.at+", the incident's close", c.index
				}
			}
		} else if (f["status"] == "incident" || f["class"] == "incident") && serr == nil {
			// The ledger gives an incident's row no retain-until while
			// its incident is open (commitRow), and one the incident
			// period past the close when it closes (CloseIncident), whose
			// leaf is logged with the close.
			p = append(p, fmt.Sprintf("swept on %s, but the audited tree holds no closure of the incident the row opened: an incident's row is kept while its incident is open, and the incident period past its close", t.sweptAt))
		}
		if serr == nil {
			p = append(p, a.grantHeld(s, swept, periods)...)
		}
		pers, sources := a.periodsBefore(before, f["class"], periods)
		var (
			keep   time.Time
			per    retention.Period
			source string
		)
		for i, pi := range pers {
			k := pi.After(start)
			if pi.Months > 0 {
				// Retention counts from the receipt's ts when that is
				// later, and months end on different days: a later start
				// never ends more than three days earlier.
				k = k.AddDate(0, 0, -3)
			}
			if i == 0 || k.Before(keep) {
				keep, per, source = k, pi, sources[i]
			}
		}
		if len(pers) > 0 && rerr == nil && uerr == nil && serr == nil && (swept.Before(keep) || until.Before(keep)) {
			p = append(p, fmt.Sprintf("retained until %s and swept on %s, before its class keeps it under %s (%s from %s: at least until %s)",
				t.retainUntil, t.sweptAt, source, per, from, keep.Format(time.RFC3339)))
		}
		if len(p) > 0 {
			a.mismatch("leaf %d (%s of row %s): its tombstone does not fit the leaf: %s", s.index, f["kind"], id, strings.Join(p, "; "))
		}
	}
}

// heldStatuses are the statuses of the receipts an incident holds with
// its grant: receipts whose signature passed (ledger.Row.ReceiptVerified,
// keepReasons). An unauthorized receipt's signature may have passed too
// (its token failed, say), which its leaf does not say: such a row is not
// checked against its grant's incidents.
var heldStatuses = []string{"authorized", "incident", "duplicate"}

// grantHeld says how swept row s's tombstone breaks the hold its grant's
// incidents put on it: an incident holds every receipt of its grant whose
// signature passed, whatever its class, from its opening (its row's
// recording, give or take ledger.IncidentSweepSkew: the sweep's time and
// the incident row's are read from two replicas' clocks) while it is
// open, and until its close plus the incident period (the shortest the
// policy leaves before the closure record, or --retention) once closed
// (the sweep's keepReasons, incidentHolds). The incidents are those
// whose row's leaf the audited tree holds; the rows an incident holds
// for sharing its agent platform and day are not checked, as no leaf
// names a row's platform.
func (a *auditor) grantHeld(s sweptLeaf, swept time.Time, given map[string]retention.Period) []string {
	f := s.leaf
	g := s.grant
	if g == ([16]byte{}) {
		g = grantKey(f["grant"])
	}
	if f["kind"] != "receipt" || !slices.Contains(heldStatuses, f["status"]) || g == ([16]byte{}) {
		return nil
	}
	if a.incidentsByGrant == nil {
		a.incidentsByGrant = incidentsByGrant(a.incidentLeaves)
	}
	var p []string
	for _, il := range a.incidentsByGrant[g] {
		a.heldVisits++
		if il.row == f["row"] || il.recorded.IsZero() || !swept.After(il.recorded.Add(ledger.IncidentSweepSkew)) {
			continue
		}
		c, closed := a.closedAt[il.row]
		at, err := time.Parse(time.RFC3339Nano, c.at)
		if !closed || err != nil {
			p = append(p, fmt.Sprintf("swept on %s, while the incident row %s (leaf %d, recorded %s) opened under the same grant has no closure in the audited tree: an open incident holds the receipts of its grant",
				s.tomb.sweptAt, il.row, il.index, il.recorded.Format(time.RFC3339Nano)))
			continue
		}
		keep, per, source := at.Truncate(time.Second), retention.Period{}, ""
		pers, sources := a.periodsBefore(c.index, "incident", given)
		for i, pi := range pers {
			if k := pi.After(at).Truncate(time.Second); i == 0 || k.Before(keep) {
				keep, per, source = k, pi, sources[i]
			}
		}
		if swept.Before(keep) {
			what := "before leaf " + strconv.FormatInt(c.index, 10) + " closed it (" + c.at + ")"
			if source != "" {
				what = fmt.Sprintf("before %s, %s under %s past its close at %s (leaf %d)", keep.Format(time.RFC3339), per, source, c.at, c.index)
			}
			p = append(p, fmt.Sprintf("swept on %s, %s: incident %s of row %s (leaf %d), opened under the same grant, holds the receipts of its grant until its close plus the incident period",
				s.tomb.sweptAt, what, c.incident, il.row, il.index))
		}
	}
	return p
}

// incidentsByGrant indexes incident leaves by their grant's grantKey,
// each grant's in leaf order; leaves without a grant are left out, as
// they hold no receipt by its grant.
func incidentsByGrant(leaves map[string]incidentLeaf) map[[16]byte][]incidentLeaf {
	by := map[[16]byte][]incidentLeaf{}
	for _, il := range leaves {
		if g := grantKey(il.grant); g != ([16]byte{}) {
			by[g] = append(by[g], il)
		}
	}
	for _, ils := range by {
		slices.SortFunc(ils, func(x, y incidentLeaf) int { return cmp.Compare(x.index, y.index) })
	}
	return by
}

// checkSweptDisputes finds the rows swept while a dispute event held
// them: a ledger whose policy leaves record a dispute period keeps a
// disputed row that period past each dispute event, and while its last
// event leaves the dispute open. Only events logged after such a policy
// leaf are checked: a ledger that logged none swept disputed rows with
// their class.
//
// The events are the dispute leaves compared with the ledger (those
// since the kept checkpoint, or every one with --all) whose row the
// server answers as swept, and the dispute leaves read before those
// (note) of every row read as swept: checkRowsPresent looks up the rows
// of the row leaves before the kept checkpoint, so a row disputed and
// logged before it, and swept since, is checked by the default audit as
// by --all. That costs no read: those leaves are kept for checkEvents,
// and the rows looked up already.
func (a *auditor) checkSweptDisputes() {
	events := slices.Clone(a.sweptEvents)
	for _, l := range a.eventLeaves {
		if t, ok := a.tombstones[l.leaf["row"]]; ok && !l.compared {
			events = append(events, sweptLeaf{index: l.index, leaf: l.leaf, tomb: *t})
		}
	}
	slices.SortFunc(events, func(x, y sweptLeaf) int { return cmp.Compare(x.index, y.index) })
	last := map[string]sweptLeaf{}
	for _, s := range events {
		f, id := s.leaf, s.leaf["row"]
		var holds []retention.Period
		for _, p := range a.policies {
			if p.index < s.index && p.hasDispute && !slices.Contains(holds, p.disputeHold) {
				holds = append(holds, p.disputeHold)
			}
		}
		if len(holds) == 0 {
			continue
		}
		last[id] = s
		at, aerr := time.Parse(time.RFC3339Nano, f["at"])
		swept, serr := time.Parse(time.RFC3339, s.tomb.sweptAt)
		if aerr != nil || serr != nil {
			continue
		}
		var keep time.Time
		var per retention.Period
		for i, h := range holds {
			if k := h.After(at).Truncate(time.Second); i == 0 || k.Before(keep) {
				keep, per = k, h
			}
		}
		if swept.Before(keep) {
			a.mismatch("leaf %d (dispute event %s of row %s at %s): the row is kept %s past a dispute event, until %s, but its tombstone says it was swept on %s",
				s.index, f["event"], id, f["at"], per, keep.Format(time.RFC3339), s.tomb.sweptAt)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(last)) {
		if s := last[id]; s.leaf["status"] == "open" {
			a.mismatch("leaf %d (dispute event %s of row %s): the row's last dispute event leaves its dispute open, but its tombstone says it was swept on %s: a row is kept while its dispute is open",
				s.index, s.leaf["event"], id, s.tomb.sweptAt)
		}
	}
}

// parseRetention parses --retention: "CLASS=PERIOD,…" with a period as
// "18 months", "18mo", "90 days" or "90d".
func parseRetention(s string) (map[string]retention.Period, error) {
	out := map[string]retention.Period{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, usagef("--retention %q: want CLASS=PERIOD,… such as money_moved=18months,read_only=90days", part)
		}
		c, err := retention.ParseClass(strings.TrimSpace(name))
		if err != nil {
			return nil, usagef("--retention: %v", err)
		}
		val = strings.ReplaceAll(strings.TrimSpace(val), " ", "")
		i := strings.IndexFunc(val, func(r rune) bool { return r < '0' || r > '9' })
		if i <= 0 {
			return nil, usagef("--retention %q: want a period such as 18months or 90days", part)
		}
		n, err := strconv.Atoi(val[:i])
		if err != nil || n <= 0 {
			return nil, usagef("--retention %q: want a positive number", part)
		}
		switch val[i:] {
		case "mo", "month", "months":
			out[c.String()] = retention.Period{Months: n}
		case "d", "day", "days":
			out[c.String()] = retention.Period{Days: n}
		default:
			return nil, usagef("--retention %q: the unit must be months (mo) or days (d)", part)
		}
	}
	return out, nil
}
