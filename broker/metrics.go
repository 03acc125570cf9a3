package broker

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wsbroker/wsbroker/opsapi"
)

// metrics holds the broker's Prometheus collectors, in a registry of its
// own so that several servers (tests) never collide on a global one.
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	running    prometheus.Gauge
	workspaces *prometheus.GaugeVec
	bytesIn    *prometheus.CounterVec
	bytesOut   *prometheus.CounterVec
	denials    *prometheus.CounterVec
}

func newMetrics(backends map[string]opsapi.Backend) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsbroker_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wsbroker_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and method, until the handler returns.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wsbroker_running_commands",
			Help: "Commands running now (exec calls and bash tool calls).",
		}),
		workspaces: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wsbroker_workspaces",
			Help: "Workspaces the broker knows, by backend.",
		}, []string{"backend"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsbroker_bytes_in_total",
			Help: "Request body bytes read on workspace routes, by backend.",
		}, []string{"backend"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsbroker_bytes_out_total",
			Help: "Response body bytes written on workspace routes, by backend.",
		}, []string{"backend"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsbroker_denials_total",
			Help: "Audited denials (requests and tool calls) by rule: tenant, authentication, rate, concurrency, quota or a policy rule.",
		}, []string{"rule"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.running, m.workspaces, m.bytesIn, m.bytesOut, m.denials,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		poolCollector(backends))
	return m
}

var (
	poolReady = prometheus.NewDesc("wsbroker_pool_ready", "Warm pool members ready to be taken, by backend and pool.", []string{"backend", "pool"}, nil)
	poolSize  = prometheus.NewDesc("wsbroker_pool_size", "Warm pool members configured, by backend and pool.", []string{"backend", "pool"}, nil)
)

// poolCollector reports the backends' warm pools as they are at each
// scrape.
type poolCollector map[string]opsapi.Backend

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolReady
	ch <- poolSize
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, b := range c {
		pr, ok := b.(opsapi.PoolReporter)
		if !ok {
			continue
		}
		for _, p := range pr.Pools() {
			ch <- prometheus.MustNewConstMetric(poolReady, prometheus.GaugeValue, float64(p.Ready), name, p.Name)
			ch <- prometheus.MustNewConstMetric(poolSize, prometheus.GaugeValue, float64(p.Size), name, p.Name)
		}
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// instrument counts every request by its route pattern (never the raw
// path, whose workspace ids would make the label set unbounded).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		defer func() {
			route := routePattern(r)
			code := ww.Status()
			if code == 0 {
				code = http.StatusOK
			}
			m.requests.WithLabelValues(route, r.Method, strconv.Itoa(code)).Inc()
			m.latency.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(ww, r)
	})
}

// routePattern is the matched chi pattern, or "unmatched".
func routePattern(r *http.Request) string {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil {
		return "unmatched"
	}
	p := rctx.RoutePattern()
	if p == "" || p == "/*" {
		return "unmatched"
	}
	return p
}
