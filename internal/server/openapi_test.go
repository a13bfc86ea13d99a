package server_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// The served OpenAPI description names the API, its version and the
// API key scheme (so a generated client sends the key), and has every
// API path docs/api.md names.
func TestOpenAPIDescription(t *testing.T) {
	e := newEnv(t, jose.ES256)
	type operation struct {
		OperationID string                 `json:"operationId"`
		Security    *[]map[string][]string `json:"security"`
	}
	var doc struct {
		Swagger string
		Info    struct{ Title, Version string }
		// SecurityDefinitions by name.
		SecurityDefinitions map[string]struct{ Type, Name, In string }
		Security            []map[string][]string
		Paths               map[string]map[string]operation
	}
	if code := e.call(t, "GET", "/openapi.json", "", nil, &doc); code != 200 {
		t.Fatalf("GET /openapi.json: %d", code)
	}
	if doc.Info.Title != "pactledger" || doc.Info.Version != "v1" {
		t.Errorf("info: title %q version %q, want pactledger v1", doc.Info.Title, doc.Info.Version)
	}
	bearer, ok := doc.SecurityDefinitions["bearer"]
	if !ok || bearer.Type != "apiKey" || bearer.In != "header" || bearer.Name != "Authorization" {
		t.Errorf("securityDefinitions: %+v, want bearer: an apiKey in the Authorization header", doc.SecurityDefinitions)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Errorf("security: %v, want every operation to need bearer", doc.Security)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			public := op.OperationID == "LedgerService_GetCheckpoint" || op.OperationID == "LedgerService_GetConsistencyProof"
			switch {
			case public && (op.Security == nil || len(*op.Security) != 0):
				t.Errorf("%s %s is public: its security should be empty", method, path)
			case !public && op.Security != nil:
				t.Errorf("%s %s overrides the key requirement: %v", method, path, *op.Security)
			}
		}
	}

	// Every API path of docs/api.md. The log's tiles and its text
	// checkpoint are static files (C2SP tlog-tiles), outside the API
	// description.
	md, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	route := regexp.MustCompile("(GET|POST|PUT|DELETE|PATCH) (/v1/[^\\s`?\\[]+)")
	found := 0
	for _, m := range route.FindAllStringSubmatch(string(md), -1) {
		method, path := strings.ToLower(m[1]), m[2]
		if path == "/v1/log/checkpoint" || strings.HasPrefix(path, "/v1/log/tile/") {
			continue
		}
		found++
		if _, ok := doc.Paths[path][method]; !ok {
			t.Errorf("docs/api.md names %s %s; /openapi.json does not have it", m[1], path)
		}
	}
	if found < 20 {
		t.Fatalf("found %d API paths in docs/api.md: the pattern no longer matches how it writes them", found)
	}
}
