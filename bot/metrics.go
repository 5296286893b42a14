package bot

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the bot's Prometheus series. Create one per process with NewMetrics and share it
// between the intake and the sender.
type Metrics struct {
	eventsReceived *prometheus.CounterVec   // transport, kind (message|card|ignored)
	eventsRejected *prometheus.CounterVec   // transport, reason
	eventsFailed   *prometheus.CounterVec   // transport, kind: handler errors (Lark redelivers)
	eventsDup      *prometheus.CounterVec   // transport, kind: events the router had already handled
	handleSeconds  *prometheus.HistogramVec // kind
	wsReconnects   prometheus.Counter
	sent           *prometheus.CounterVec // kind
	sendErrors     *prometheus.CounterVec // code (Lark code, "transport" or "refused")
	sendFailed     *prometheus.CounterVec // code: rows given up on
	lag            prometheus.Histogram   // commit to sent
}

// NewMetrics creates the series and registers them on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		eventsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopx_lark_events_received_total", Help: "Lark events and card callbacks received, by transport and kind.",
		}, []string{"transport", "kind"}),
		eventsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopx_lark_events_rejected_total", Help: "Lark callbacks refused (signature, token, decryption, malformed), by transport and reason.",
		}, []string{"transport", "reason"}),
		eventsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopx_lark_events_failed_total", Help: "Lark events whose handling failed and was left for redelivery.",
		}, []string{"transport", "kind"}),
		eventsDup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopx_lark_events_duplicate_total", Help: "Lark events and card callbacks already handled (a redelivery, or the same event on another replica), by transport and kind.",
		}, []string{"transport", "kind"}),
		handleSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loopx_lark_event_handle_seconds", Help: "Time from receipt to acknowledgement of a Lark event.",
			Buckets: []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"kind"}),
		wsReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loopx_lark_ws_reconnects_total", Help: "Lark long-connection reconnects (SDK reconnects and watchdog restarts).",
		}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopx_outbox_sent_total", Help: "Outbox rows delivered to Lark, by kind.",
		}, []string{"kind"}),
		sendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopx_outbox_send_errors_total", Help: "Failed Lark send attempts, by Lark code.",
		}, []string{"code"}),
		sendFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopx_outbox_failed_total", Help: "Outbox rows given up on, by Lark code.",
		}, []string{"code"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "loopx_outbox_lag_seconds", Help: "Time from outbox commit to Lark accepting the message.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.eventsReceived, m.eventsRejected, m.eventsFailed, m.eventsDup, m.handleSeconds,
			m.wsReconnects, m.sent, m.sendErrors, m.sendFailed, m.lag)
	}
	return m
}

// CountDuplicate counts one Lark event the router recognised as already handled. It has the
// shape of router.Options.OnDuplicate: the router alone knows an event id was seen before
// (it returns nil either way), and ctx carries the transport the intake received it on.
func (m *Metrics) CountDuplicate(ctx context.Context, eventType string) {
	kind := "other"
	switch eventType {
	case eventMessage:
		kind = "message"
	case eventCardAction:
		kind = "card"
	}
	m.eventsDup.WithLabelValues(transportOf(ctx), kind).Inc()
}
