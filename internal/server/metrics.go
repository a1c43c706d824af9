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
	// The GenAI client metrics (OpenTelemetry's gen_ai.client.token.usage
	// and gen_ai.client.operation.duration, in Prometheus names) and the
	// tool calls' duration.
	tokens    *prometheus.HistogramVec
	modelTime *prometheus.HistogramVec
	toolTime  *prometheus.HistogramVec
	reg       *prometheus.Registry
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
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gen_ai_client_token_usage",
			Help:    "Tokens used per model call (gen_ai.client.token.usage) by agent, provider, model and token type (input, output).",
			Buckets: []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}},
			[]string{"agent", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_token_type"}),
		modelTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gen_ai_client_operation_duration_seconds",
			Help:    "Duration of model calls (gen_ai.client.operation.duration) by agent, provider, model and error type (empty: none).",
			Buckets: []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}},
			[]string{"agent", "gen_ai_provider_name", "gen_ai_request_model", "error_type"}),
		toolTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stackbone_tool_call_duration_seconds",
			Help: "Duration of tool calls by agent, tool and outcome.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)},
			[]string{"agent", "tool", "outcome"}),
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
	reg.MustRegister(m.requests, m.latency, m.turns, m.activeRuns, pending, m.tokens, m.modelTime, m.toolTime,
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
		ModelCall: func(c engine.ModelCallInfo) {
			m.modelTime.WithLabelValues(c.Agent, c.Provider, c.Model, c.ErrorType).Observe(c.Duration.Seconds())
			if c.ErrorType == "" {
				m.tokens.WithLabelValues(c.Agent, c.Provider, c.Model, "input").Observe(float64(c.Usage.InputTokens))
				m.tokens.WithLabelValues(c.Agent, c.Provider, c.Model, "output").Observe(float64(c.Usage.OutputTokens))
			}
		},
		ToolCall: func(c engine.ToolCallInfo) {
			m.toolTime.WithLabelValues(c.Agent, c.Tool, c.Outcome).Observe(c.Duration.Seconds())
		},
	}
}

func (m *Metrics) observeRequest(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}
