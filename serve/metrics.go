package serve

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus series, on a registry of its own.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	batchSize *prometheus.HistogramVec
	tokens    *prometheus.CounterVec
	tokensPS  *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zoo_requests_total",
			Help: "HTTP requests answered, by endpoint and status code."}, []string{"endpoint", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zoo_request_errors_total",
			Help: "HTTP requests answered with a status of 400 or more, by endpoint and status code."}, []string{"endpoint", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zoo_request_duration_seconds",
			Help: "Time from a request's arrival to its answer, by endpoint.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"endpoint"}),
		batchSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zoo_batch_size",
			Help: "Sequences per batch run, by model.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zoo_tokens_total",
			Help: "Tokens run through a model (rate() of it is tokens/s), by model."}, []string{"model"}),
		tokensPS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "zoo_tokens_per_second",
			Help: "Tokens per second of a model's last batch, by model."}, []string{"model"}),
	}
	m.reg.MustRegister(m.requests, m.errors, m.latency, m.batchSize, m.tokens, m.tokensPS,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// queueDepth registers a gauge of b's queued requests.
func (m *metrics) queueDepth(b *batcher) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zoo_queue_depth",
		Help: "Requests waiting in a model's queue.", ConstLabels: prometheus.Labels{"model": b.m.Name}},
		func() float64 { return float64(len(b.q)) }))
}

func (m *metrics) request(endpoint string, code int, d time.Duration) {
	label := strconv.Itoa(code)
	m.requests.WithLabelValues(endpoint, label).Inc()
	if code >= 400 {
		m.errors.WithLabelValues(endpoint, label).Inc()
	}
	m.latency.WithLabelValues(endpoint).Observe(d.Seconds())
}

func (m *metrics) batch(model string, seqs, tokens int, d time.Duration) {
	m.batchSize.WithLabelValues(model).Observe(float64(seqs))
	m.tokens.WithLabelValues(model).Add(float64(tokens))
	if d > 0 {
		m.tokensPS.WithLabelValues(model).Set(float64(tokens) / d.Seconds())
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
