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

// KeyTableMetrics are the Prometheus metrics of the signing keys' tables
// (SetKeyTables). A nil *KeyTableMetrics records nothing.
type KeyTableMetrics struct {
	tables   prometheus.Gauge
	made     prometheus.Counter
	replaced prometheus.Counter
	failed   prometheus.Counter
	accepted prometheus.Counter
	refused  prometheus.Counter
}

// NewKeyTableMetrics creates the signing keys' tables' metrics and
// registers them with reg.
func NewKeyTableMetrics(reg prometheus.Registerer) *KeyTableMetrics {
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pactledger_signing_key_table_checks_total",
		Help: "ES256 signatures checked through a signing key's table: accepted, or refused and then checked again by crypto/ecdsa, whose verdict stands.",
	}, []string{"verdict"})
	m := &KeyTableMetrics{
		tables: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pactledger_signing_key_tables", Help: "Signing keys that have a table of their multiples (at most verifier.keyTables).",
		}),
		made: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pactledger_signing_key_tables_made_total", Help: "Tables of a signing key's multiples made and kept.",
		}),
		replaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pactledger_signing_key_tables_replaced_total", Help: "Tables dropped for a key that verified more signatures over the last two windows.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pactledger_signing_key_table_failures_total", Help: "Tables not kept because their self-check against ScalarMult failed: the key's signatures stay with crypto/ecdsa. Not expected to happen; a rise is a defect to report.",
		}),
		accepted: checks.WithLabelValues("accepted"),
		refused:  checks.WithLabelValues("refused"),
	}
	reg.MustRegister(m.tables, m.made, m.replaced, m.failed, checks)
	return m
}

// checked records a signature checked through a table.
func (m *KeyTableMetrics) checked(accepted bool) {
	switch {
	case m == nil:
	case accepted:
		m.accepted.Inc()
	default:
		m.refused.Inc()
	}
}

// kept records a table made and kept, replacing another or not, and the
// tables kept after it.
func (m *KeyTableMetrics) kept(replaced bool, tables int) {
	if m != nil {
		m.made.Inc()
		if replaced {
			m.replaced.Inc()
		}
		m.tables.Set(float64(tables))
	}
}

// failure records a table whose making failed.
func (m *KeyTableMetrics) failure() {
	if m != nil {
		m.failed.Inc()
	}
}

// reset records that no table is kept.
func (m *KeyTableMetrics) reset() {
	if m != nil {
		m.tables.Set(0)
	}
}
