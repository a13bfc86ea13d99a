package ledgerv1

import _ "embed"

// OpenAPI is the OpenAPI v2 description of the REST API, generated from
// ledger.proto and ledger_http.yaml by protoc-gen-openapiv2.
//
//go:embed ledger.swagger.json
var OpenAPI []byte
