package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/pact"
)

// refusalsNotRecorded is a prometheus.Collector of
// pactledger_provider_refusals_not_recorded_total{brand, reason}: the
// refusals of account actions asked under PACT §3 alone that the
// embedded Provider answered but did not put on record for the ledger,
// by brand id and why: "rate" (over provider.refusalLimit) or "outbox"
// (their share of provider.outboxMaxBytes, or the whole of it, was
// full); and the denied consents it honoured but did not put on record,
// "denial_outbox" (the denied consents' share of the outbox, or the
// whole of it, was full). Every brand shows all three, from 0.
type refusalsNotRecorded struct {
	provider func() *pact.Provider // nil until the Provider is started
	desc     *prometheus.Desc
}

func newRefusalsNotRecorded(provider func() *pact.Provider) *refusalsNotRecorded {
	return &refusalsNotRecorded{provider: provider, desc: prometheus.NewDesc("pactledger_provider_refusals_not_recorded_total",
		"Refusals the Provider answered but did not put on record for the ledger, by brand and reason: of account actions asked without a delegation grant (PACT §3 alone), rate (over provider.refusalLimit) or outbox (no room left for them in the outbox); of a User's denied consent, honoured, denial_outbox (no room left for denied consents in the outbox).",
		[]string{"brand", "reason"}, nil)}
}

// Describe implements prometheus.Collector.
func (r *refusalsNotRecorded) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

// Collect implements prometheus.Collector.
func (r *refusalsNotRecorded) Collect(ch chan<- prometheus.Metric) {
	p := r.provider()
	if p == nil {
		return
	}
	for brand, n := range p.RefusalsNotRecorded() {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.CounterValue, float64(n.OverRate), brand, "rate")
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.CounterValue, float64(n.OverRoom), brand, "outbox")
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.CounterValue, float64(n.DenialsOverRoom), brand, "denial_outbox")
	}
}
