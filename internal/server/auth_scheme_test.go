package server_test

import (
	"net/http"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// The Bearer scheme name is case-insensitive (RFC 9110 §11.1); the key is
// not.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"Bearer " + keys["support"], 200},
		{"bearer " + keys["support"], 200},
		{"BEARER  " + keys["support"], 200},
		{"Bearer " + keys["support"] + "X", 401},
		{"Basic " + keys["support"], 401},
	} {
		req, _ := http.NewRequest("GET", e.base+"/v1/rows?principal=acct-1", nil)
		req.Header.Set("Authorization", tc.header)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%.12q…: %d, want %d", tc.header, res.StatusCode, tc.want)
		}
	}
}
