package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the ledger's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	writes            *prometheus.CounterVec
	verify            prometheus.Histogram
	unclassifiedTools prometheus.Counter
	uploads           *prometheus.CounterVec
	sweptRows         *prometheus.CounterVec
	deletedObjects    prometheus.Counter
	pendingDeletes    prometheus.Gauge
	refusedSweeps     *prometheus.CounterVec
	clockOffset       *prometheus.GaugeVec
	clockOffGauge     prometheus.Gauge
	clockRefused      prometheus.Counter
	// OutboxDepth is the number of objects waiting for evidence storage.
	OutboxDepth prometheus.Gauge
	// DeadLetters is the number of outbox entries moved aside because they
	// could not succeed (see `ledgerctl outbox`).
	DeadLetters  prometheus.Gauge
	logLeafCount prometheus.Counter
	// LogSize is the size of the row store's latest signed checkpoint (on
	// every replica, whichever signed it).
	LogSize prometheus.Gauge
	// LogPruned is how many leading leaves the row store no longer holds
	// because write-once storage holds their tiles.
	LogPruned prometheus.Gauge
	// LogDiverged is 1 while the Merkle log in write-once storage is not
	// this ledger's, so nothing of it is published (ErrLogDiverged).
	LogDiverged prometheus.Gauge
	// LogWrongKey is 1 once this ledger's integrator found the row
	// store's log signed by another key than its own (ErrLogKey) and gave
	// up the integrator's lease until restarted.
	LogWrongKey prometheus.Gauge
	// LogWaiting is how long leaves have waited while the log did not
	// grow (logState.waiting).
	LogWaiting prometheus.Gauge
	// LogLeavesRefused counts the queued leaves the integrator took off
	// the queue without logging them, their ref having a leaf in the log
	// already (ErrRefLogged).
	LogLeavesRefused prometheus.Counter
	// LogForeignObjects counts the objects under the log's keys in
	// write-once storage that this ledger did not write (errForeignObject),
	// each counted once by this process when found.
	LogForeignObjects prometheus.Counter
}

// NewMetrics creates the ledger's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pactledger_writes_total", Help: "Appends by outcome and row status.",
		}, []string{"outcome", "status"}),
		verify: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "pactledger_verify_seconds", Help: "Time to verify one receipt, JWKS fetches included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		// No tool label: tool names come from writers and would make the
		// series count unbounded. The rows name their tools.
		unclassifiedTools: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pactledger_unclassified_tool_rows_total", Help: "Rows with a tool missing from the retention table (given the longest class); see the rows' unclassifiedTools.",
		}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pactledger_evidence_uploads_total", Help: "Evidence object uploads by result: ok, error (retried), dead (moved to the dead letters), moot (an extension or release of a swept snapshot, or a release of an object an open incident holds, dropped).",
		}, []string{"result"}),
		OutboxDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pactledger_outbox_depth", Help: "Evidence objects committed in bbolt and not yet in evidence storage.",
		}),
	}
	m.sweptRows = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pactledger_swept_rows_total", Help: "Rows removed by the retention sweeper, by class."}, []string{"class"})
	m.deletedObjects = prometheus.NewCounter(prometheus.CounterOpts{Name: "pactledger_swept_objects_total", Help: "Write-once objects deleted after their retention."})
	m.pendingDeletes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pactledger_sweep_pending_objects", Help: "Objects due for deletion that the store refused or failed to delete (retried next sweep)."})
	m.refusedSweeps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pactledger_sweeps_refused_total",
		Help: "Retention sweeps that deleted nothing because of the ledger's clock, by what they sweep (rows, access_log: the access log's hourly prune) and reason: clock_ahead (ahead of the S3 or PostgreSQL server's by more than 5 minutes), clock_unread (a server's clock could not be read). Due rows and records wait for the next sweep."}, []string{"sweep", "reason"})
	reg.MustRegister(m.sweptRows, m.deletedObjects, m.pendingDeletes, m.refusedSweeps)
	m.clockOffset = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pactledger_clock_offset_seconds",
		Help: "The ledger's clock minus a reference clock's (the S3 evidence store's, the PostgreSQL row store's) at the last reading, a minute apart: positive, the ledger's clock is ahead. Writes are refused while it is beyond ±300."}, []string{"clock"})
	m.clockOffGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pactledger_clock_off",
		Help: "1 while writes are refused because the ledger's clock is off a reference clock by more than 5 minutes (a step of the host's clock is seen at once): nothing is recorded until the clocks agree; the log says which clock and by how much."})
	m.clockRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "pactledger_clock_refused_writes_total",
		Help: "Writes (receipts, refusals, dispute events, incident closes, revocations) refused, nothing recorded, because the ledger's clock was off a reference clock by more than 5 minutes; writers retry."})
	reg.MustRegister(m.clockOffset, m.clockOffGauge, m.clockRefused)
	m.DeadLetters = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pactledger_outbox_dead_letters", Help: "Outbox entries moved to the dead letters because they cannot succeed; list them with `ledgerctl outbox`."})
	reg.MustRegister(m.writes, m.verify, m.unclassifiedTools, m.uploads, m.OutboxDepth, m.DeadLetters)
	m.logLeafCount = prometheus.NewCounter(prometheus.CounterOpts{Name: "pactledger_log_leaves_total", Help: "Leaves added to the Merkle log (rows, dispute events, incident closures)."})
	m.LogSize = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pactledger_log_size", Help: "Tree size of the latest signed checkpoint."})
	m.LogPruned = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pactledger_log_leaves_in_tiles_only", Help: "Leading leaves of the Merkle log dropped from the row store because write-once storage holds their tiles and entry bundles."})
	m.LogDiverged = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pactledger_log_diverged", Help: "1 while the Merkle log in write-once storage is not this ledger's (another ledger's, or one this row store has not got all of), so this ledger publishes no tiles or checkpoints; the integrator's log says what differs."})
	m.LogWrongKey = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pactledger_log_wrong_key", Help: "1 once this ledger's log key was found not to be the one that signed the row store's checkpoints: it released the log integrator's lease and signs and publishes nothing of the log until restarted with the right key (/readyz says not ready)."})
	m.LogWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: "pactledger_log_waiting_seconds", Help: "How long leaves have waited in the Merkle log's queue while the log did not grow, as this replica reads the row store: 0 while the log keeps up. Rows recorded meanwhile have no proof yet; a value that keeps climbing means no integrator extends the log."})
	m.LogLeavesRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "pactledger_log_leaves_refused_total", Help: "Queued leaves the Merkle log's integrator did not log because their row or event already has a leaf in the log (a second leaf of a logged row: the row store was written outside the ledger); each is logged at ERROR with its ref. Alert on any."})
	m.LogForeignObjects = prometheus.NewCounter(prometheus.CounterOpts{Name: "pactledger_log_foreign_objects_total", Help: "Objects found under the Merkle log's keys in write-once storage that this ledger did not write: a checkpoint its log key did not sign, a tile other than its own. Each is logged at ERROR with its key. Alert on any."})
	reg.MustRegister(m.logLeafCount, m.LogSize, m.LogPruned, m.LogDiverged, m.LogWrongKey, m.LogWaiting, m.LogLeavesRefused, m.LogForeignObjects)
	return m
}

// logWaiting sets pactledger_log_waiting_seconds.
func (m *Metrics) logWaiting(d time.Duration) {
	if m != nil {
		m.LogWaiting.Set(d.Seconds())
	}
}

func (m *Metrics) logLeaves(n int) {
	if m != nil && n > 0 {
		m.logLeafCount.Add(float64(n))
	}
}

func (m *Metrics) logForeign() {
	if m != nil {
		m.LogForeignObjects.Inc()
	}
}

func (m *Metrics) logRefused(n int) {
	if m != nil && n > 0 {
		m.LogLeavesRefused.Add(float64(n))
	}
}

// logSize sets pactledger_log_size to the size of the row store's latest
// checkpoint, whichever replica signed it.
func (m *Metrics) logSize(n int64) {
	if m != nil {
		m.LogSize.Set(float64(n))
	}
}

func (m *Metrics) logDiverged(on bool) {
	if m != nil {
		setBool(m.LogDiverged, on)
	}
}

// setBool sets g to 1 when on, else 0.
func setBool(g prometheus.Gauge, on bool) {
	v := 0.0
	if on {
		v = 1
	}
	g.Set(v)
}

func (m *Metrics) logWrongKey() {
	if m != nil {
		m.LogWrongKey.Set(1)
	}
}

func (m *Metrics) logPruned(n int64) {
	if m != nil {
		m.LogPruned.Set(float64(n))
	}
}

func (m *Metrics) write(o Outcome, s Status) {
	if m != nil {
		m.writes.WithLabelValues(o.String(), s.String()).Inc()
	}
}

func (m *Metrics) verified(d time.Duration) {
	if m != nil {
		m.verify.Observe(d.Seconds())
	}
}

func (m *Metrics) unclassified() {
	if m != nil {
		m.unclassifiedTools.Inc()
	}
}

func (m *Metrics) uploaded(result string, n int) {
	if m != nil {
		m.uploads.WithLabelValues(result).Add(float64(n))
	}
}

func (m *Metrics) depth(n int) {
	if m != nil {
		m.OutboxDepth.Set(float64(n))
	}
}

func (m *Metrics) deadLetters(n int) {
	if m != nil {
		m.DeadLetters.Set(float64(n))
	}
}

func (m *Metrics) swept(c fmt.Stringer) {
	if m != nil {
		m.sweptRows.WithLabelValues(c.String()).Inc()
	}
}

// Sweeps whose refusals sweepRefused counts.
const (
	sweepRows      = "rows"
	sweepAccessLog = "access_log"
)

// sweepRefused counts a sweep of what (sweepRows, sweepAccessLog) that
// checkClock stopped with err.
func (m *Metrics) sweepRefused(what string, err error) {
	if m == nil {
		return
	}
	reason := "clock_unread"
	if errors.Is(err, ErrClockAhead) {
		reason = "clock_ahead"
	}
	m.refusedSweeps.WithLabelValues(what, reason).Inc()
}

// clockOff sets the offset of the ledger's clock from the reference named
// clock at its last reading.
func (m *Metrics) clockOff(clock string, off time.Duration) {
	if m != nil {
		m.clockOffset.WithLabelValues(clock).Set(off.Seconds())
	}
}

// clockRefusing sets pactledger_clock_off.
func (m *Metrics) clockRefusing(on bool) {
	if m != nil {
		setBool(m.clockOffGauge, on)
	}
}

func (m *Metrics) writeRefusedForClock() {
	if m != nil {
		m.clockRefused.Inc()
	}
}

func (m *Metrics) objectsDeleted(done, pending int) {
	if m != nil {
		m.deletedObjects.Add(float64(done))
		m.pendingDeletes.Set(float64(pending))
	}
}
