package server

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/store"
)

// Metrics are the Prometheus metrics the server exposes at /metrics.
type Metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	turns      *prometheus.HistogramVec
	activeRuns prometheus.Gauge
	reg        *prometheus.Registry
}

// NewMetrics registers the metrics on reg; st answers the pending-decisions
// gauge. Pass RunHooks to the runner (engine.Config.Hooks).
func NewMetrics(reg *prometheus.Registry, st store.Store) *Metrics {
	m := &Metrics{reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stackbone_http_requests_total",
			Help: "HTTP requests by route and status (499: the client hung up first)."}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stackbone_http_request_duration_seconds",
			Help: "HTTP request duration by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"route"}),
		turns: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stackbone_turn_duration_seconds",
			Help: "Duration of agent runs by agent and outcome (client_closed: a stateless run's client hung up).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"agent", "outcome"}),
		activeRuns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "stackbone_active_runs", Help: "Runs executing now."}),
	}
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stackbone_pending_decisions", Help: "Tool calls waiting on a human decision."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := st.CountPending(ctx)
			if err != nil {
				return math.NaN()
			}
			return float64(n)
		})
	reg.MustRegister(m.requests, m.latency, m.turns, m.activeRuns, pending,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// RunHooks are the runner hooks that feed the run metrics.
func (m *Metrics) RunHooks() engine.Hooks {
	return engine.Hooks{
		RunStarted: func(string) { m.activeRuns.Inc() },
		RunEnded: func(agent, outcome string, d time.Duration) {
			m.activeRuns.Dec()
			m.turns.WithLabelValues(agent, outcome).Observe(d.Seconds())
		},
	}
}

func (m *Metrics) observeRequest(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}
