package server

import (
	"context"
	"log/slog"
	"strings"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/pact"
	"github.com/pactledger/pactledger/retention"
)

// fileBrandRetention files the tools and scopes of the brands this ledgerd
// serves (or trusts as the Provider's replica) in the classes their brand
// files name, where brand files disagree the class policy's periods keep
// longest, and logs each disagreement.
//
// The tables are the ledger's, not one brand's: the ledger classifies a
// row by its tools and scopes alone, whatever its brand. So a brand file
// may lengthen the class the built-in table gives a tool or scope, never
// shorten it: every other brand's receipts (external brands' too) take
// that class. retention.tools and retention.scopes in the configuration
// still win.
func fileBrandRetention(ctx context.Context, log *slog.Logger, policy retention.Policy, conf config.Retention, brands map[string]*pact.Brand) {
	for _, f := range pact.BrandRetention(brands, policy) {
		table, configured := policy.Tools, conf.Tools
		if f.Kind == "scope" {
			table, configured = policy.Scopes, conf.Scopes
		}
		_, set := configured[f.Name]
		builtin, known := table[f.Name]
		in, why := f.Class, "its period under retention.periods is the longest"
		switch {
		case set:
			in, why = table[f.Name], "retention."+f.Kind+"s names it"
		case known && policy.Longer(builtin, f.Class) == builtin:
			in, why = builtin, "the ledger's table keeps it longer"
		default:
			table[f.Name] = f.Class
		}
		if f.Disagree() {
			log.WarnContext(ctx, "brand files disagree on a "+f.Kind+"'s retention class",
				slog.String(f.Kind, f.Name), slog.String("brands", f.BrandClasses()), slog.String("class", in.String()), slog.String("because", why))
		}
		if shorter := f.ShorterThan(builtin, policy); known && !set && len(shorter) > 0 {
			for i, id := range shorter {
				shorter[i] = id + ": " + f.Brands[id].String()
			}
			log.WarnContext(ctx, "a brand file puts a "+f.Kind+" in a shorter retention class than the ledger's table; every brand's receipts keep the table's class (set retention."+f.Kind+"s to change it)",
				slog.String(f.Kind, f.Name), slog.String("brands", strings.Join(shorter, ", ")), slog.String("class", builtin.String()))
		}
	}
}
