package server_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// Paging through the access log ends where its first page did: the reads
// made after it began, the listing's own pages among them, are on no page
// of it, and a listing begun after them finds them.
func TestAccessLogPagesEndWhereTheFirstDid(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for range 3 {
		if code := e.call(t, "GET", "/v1/rows?target=A-1", "support", nil, nil); code != http.StatusOK {
			t.Fatalf("read: %d", code)
		}
	}
	page := func(token string) ([]accessRecord, string) {
		var rep struct {
			Records       []accessRecord
			NextPageToken string
		}
		q := "?pageSize=1&key=support-key"
		if token != "" {
			q += "&pageToken=" + url.QueryEscape(token)
		}
		if code := e.call(t, "GET", "/v1/access-log"+q, "admin", nil, &rep); code != http.StatusOK {
			t.Fatalf("GET /v1/access-log%s: %d", q, code)
		}
		return rep.Records, rep.NextPageToken
	}
	var seqs []uint64
	recs, token := page("")
	for pages := 1; ; pages++ {
		if pages > 10 {
			t.Fatalf("the listing is not over after 10 pages of 1 (records %v): the reads made while paging go on extending it", seqs)
		}
		for _, r := range recs {
			n, _ := strconv.ParseUint(r.Seq, 10, 64)
			seqs = append(seqs, n)
		}
		// Reads made while paging: none is listed on a later page.
		if code := e.call(t, "GET", "/v1/rows?target=A-2", "support", nil, nil); code != http.StatusOK {
			t.Fatalf("read: %d", code)
		}
		if token == "" {
			break
		}
		recs, token = page(token)
	}
	if len(seqs) != 3 {
		t.Fatalf("the listing held %d of the support key's reads (records %v), want the 3 made before it began", len(seqs), seqs)
	}
	if all := e.accessLog(t, "?key=support-key"); len(all) <= 3 {
		t.Fatalf("a listing begun after: %d records, want the reads made while paging too", len(all))
	}
}
