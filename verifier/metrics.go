package verifier

import "github.com/prometheus/client_golang/prometheus"

// CacheMetrics are the Prometheus metrics of a Verifier's signature cache
// (Config.CacheSize). A nil *CacheMetrics records nothing.
type CacheMetrics struct {
	hits      prometheus.Counter
	misses    prometheus.Counter
	evictions prometheus.Counter
	entries   prometheus.Gauge
}

// NewCacheMetrics creates the signature cache's metrics and registers them
// with reg.
func NewCacheMetrics(reg prometheus.Registerer) *CacheMetrics {
	m := &CacheMetrics{
		hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pactledger_signature_cache_hits_total", Help: "Delegation token signatures found already verified against the same key-set bytes (no signature check run).",
		}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pactledger_signature_cache_misses_total", Help: "Delegation token signatures not in the cache (checked, and kept when they verified).",
		}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pactledger_signature_cache_evictions_total", Help: "Verified signatures dropped from the cache, least recently used first, to stay within verifier.cacheSize.",
		}),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pactledger_signature_cache_entries", Help: "Verified signatures held in the cache.",
		}),
	}
	reg.MustRegister(m.hits, m.misses, m.evictions, m.entries)
	return m
}

func (m *CacheMetrics) hit() {
	if m != nil {
		m.hits.Inc()
	}
}

func (m *CacheMetrics) miss() {
	if m != nil {
		m.misses.Inc()
	}
}

// stored records the cache's size after an insert and the entries it
// evicted.
func (m *CacheMetrics) stored(entries, evicted int) {
	if m != nil {
		m.entries.Set(float64(entries))
		m.evictions.Add(float64(evicted))
	}
}
