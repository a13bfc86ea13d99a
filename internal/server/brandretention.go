package server

import (
	"context"
	"log/slog"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/pact"
	"github.com/pactledger/pactledger/retention"
)

// fileBrandRetention files the tools and scopes of the brands this ledgerd
// serves (or trusts as the Provider's replica) in the classes their brand
// files name, where brand files disagree the class policy's periods keep
// longest, and logs each disagreement. retention.tools and
// retention.scopes in the configuration still win.
func fileBrandRetention(ctx context.Context, log *slog.Logger, policy retention.Policy, conf config.Retention, brands map[string]*pact.Brand) {
	for _, f := range pact.BrandRetention(brands, policy) {
		table, configured := policy.Tools, conf.Tools
		if f.Kind == "scope" {
			table, configured = policy.Scopes, conf.Scopes
		}
		_, set := configured[f.Name]
		if f.Disagree() {
			in, why := f.Class, "its period under retention.periods is the longest"
			if set {
				in, why = table[f.Name], "retention."+f.Kind+"s names it"
			}
			log.WarnContext(ctx, "brand files disagree on a "+f.Kind+"'s retention class",
				slog.String(f.Kind, f.Name), slog.String("brands", f.BrandClasses()), slog.String("class", in.String()), slog.String("because", why))
		}
		if !set {
			table[f.Name] = f.Class
		}
	}
}
