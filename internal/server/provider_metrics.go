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
// full). Every brand shows both, from 0.
type refusalsNotRecorded struct {
	provider func() *pact.Provider // nil until the Provider is started
	desc     *prometheus.Desc
}

func newRefusalsNotRecorded(provider func() *pact.Provider) *refusalsNotRecorded {
	return &refusalsNotRecorded{provider: provider, desc: prometheus.NewDesc("pactledger_provider_refusals_not_recorded_total",
		"Refusals of account actions asked without a delegation grant (PACT §3 alone) that the Provider answered but did not put on record for the ledger, by brand and reason: rate (over provider.refusalLimit) or outbox (no room left for them in the outbox).",
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
	}
}
