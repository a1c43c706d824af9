// Package notify delivers the webhook outbox: notices the store wrote in
// the same transaction as the facts they report (decision.pending,
// decision.decided, decision.expired, run.completed, run.failed) are
// posted to every configured endpoint, signed per Standard Webhooks
// (webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC-SHA256
// of "id.timestamp.body">).
//
// Delivery is at least once with the same webhook-id on every attempt:
// a delivery is leased before it is attempted (so of several replicas one
// attempts it), and a process that dies mid-attempt leaves a lease that
// lapses, after which the delivery is attempted again. A failed attempt is
// retried on the Standard Webhooks schedule (5 s, 5 min, 30 min, 2 h, 5 h,
// 10 h, 10 h: about 27 hours) and then marked failed. Turns never wait on
// an endpoint: they only write rows.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/propagation"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/ssrf"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/telemetry"
)

// Schedule is the Standard Webhooks retry schedule: the wait after each
// failed attempt; after the last the delivery is failed.
var Schedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
	10 * time.Hour, 10 * time.Hour}

// Defaults.
const (
	// DefaultTimeout bounds one attempt.
	DefaultTimeout = 10 * time.Second
	// DefaultPoll is how often the dispatcher looks for due deliveries
	// when nothing wakes it (deliveries written by another replica, retries
	// coming due).
	DefaultPoll = time.Second
	// PerEndpoint is how many attempts to one endpoint run at once, so a
	// slow endpoint holds up only its own deliveries.
	PerEndpoint = 4
	// Retention is how long finished deliveries stay listed.
	Retention = 7 * 24 * time.Hour
)

// Config configures a Dispatcher.
type Config struct {
	Store store.Outbox
	// Endpoints are the endpoint URLs; outbox rows name them by
	// store.WebhookRef.
	Endpoints []string
	// Secret is the whsec_ signing secret ("" sends unsigned, which only
	// the slack format allows).
	Secret string
	// Format is config.WebhookStandard or config.WebhookSlack.
	Format string
	// PublicURL is the server's base URL, for Studio links.
	PublicURL string
	Logger    *slog.Logger
	Clock     clock.Clock
	// Client sends the requests (a client with DefaultTimeout when nil,
	// whose requests carry their context's trace context).
	Client *http.Client
	// Schedule overrides the retry schedule (tests).
	Schedule []time.Duration
	// Poll overrides DefaultPoll.
	Poll time.Duration
	// Version goes in the User-Agent.
	Version string
	// Push, when set, delivers the A2A push notifications the store
	// queued (outbox endpoints store.PushEndpoint), to the URL, token and
	// authentication of each config it holds.
	Push PushConfigs
	// PushClient sends the push notifications: requests to URLs clients
	// named, so with the SSRF rules (ssrf.Client; one with
	// DefaultTimeout and the rules when nil).
	PushClient *http.Client
	// Tracer, when set, makes a CLIENT span of each delivery attempt,
	// whose trace context the request carries (traceparent): nil or the
	// no-op provider make none.
	Tracer trace.TracerProvider
}

// Dispatcher delivers the outbox until its context ends.
type Dispatcher struct {
	cfg   Config
	key   []byte
	owner string
	wake  chan struct{}
	mu    sync.Mutex
	busy  map[string]int // attempts in flight per endpoint
	wg    sync.WaitGroup
	// refs are the endpoints' references, in order; urls maps each back.
	refs []string
	urls map[string]string
	// tracer makes the delivery spans (nil: none).
	tracer trace.Tracer
}

// New checks the configuration and returns a dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	d := &Dispatcher{cfg: cfg, owner: ids.New("wh"), wake: make(chan struct{}, 1), busy: map[string]int{}, urls: map[string]string{}}
	for _, u := range cfg.Endpoints {
		ref := store.WebhookRef(u)
		d.refs = append(d.refs, ref)
		d.urls[ref] = u
	}
	if cfg.Secret != "" {
		key, err := config.WebhookKey(cfg.Secret)
		if err != nil {
			return nil, err
		}
		d.key = key
	} else if cfg.Format != config.WebhookSlack && len(cfg.Endpoints) > 0 {
		return nil, errors.New("notify: a signing secret is required")
	}
	if d.cfg.PushClient == nil {
		d.cfg.PushClient = ssrf.Client(DefaultTimeout, false)
	}
	d.cfg.PushClient = telemetry.Client(d.cfg.PushClient)
	if d.cfg.Logger == nil {
		d.cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if d.cfg.Client == nil {
		d.cfg.Client = telemetry.Client(&http.Client{Timeout: DefaultTimeout})
	}
	switch cfg.Tracer.(type) {
	case nil, noop.TracerProvider:
	default:
		d.tracer = cfg.Tracer.Tracer(telemetry.ScopeName)
	}
	if d.cfg.Schedule == nil {
		d.cfg.Schedule = Schedule
	}
	if d.cfg.Poll <= 0 {
		d.cfg.Poll = DefaultPoll
	}
	return d, nil
}

// scheduleSpan is how long the retry schedule lasts in all.
func (d *Dispatcher) scheduleSpan() time.Duration {
	var total time.Duration
	for _, w := range d.cfg.Schedule {
		total += w
	}
	return total
}

// SetPublicURL sets the base of Studio links once the server's address is
// known; call it before Run.
func (d *Dispatcher) SetPublicURL(u string) { d.cfg.PublicURL = u }

// Wake makes the dispatcher look for due deliveries now (a transaction
// just wrote some). It never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.wg.Wait()
	// The poll's timer is armed again after each look it prompted (not
	// after a wake-up's), so a test on a fake clock that advances past it
	// and waits for it to be armed knows a look at the new time is done.
	t := clock.Or(d.cfg.Clock).NewTimer(d.cfg.Poll)
	defer t.Stop()
	polled := false
	lastSweep := time.Time{}
	for {
		d.dispatch(ctx)
		now := clock.Or(d.cfg.Clock).Now()
		if now.Sub(lastSweep) > time.Hour {
			lastSweep = now
			// A delivery still pending an hour after its whole schedule
			// would have ended is one no dispatcher attempts (its
			// endpoint was removed): it is marked failed.
			if _, err := d.cfg.Store.SweepDeliveries(ctx, now.Add(-Retention), now.Add(-d.scheduleSpan()-time.Hour)); err != nil && ctx.Err() == nil {
				d.cfg.Logger.Warn("sweep webhook deliveries", "err", err)
			}
		}
		if polled {
			t.Reset(d.cfg.Poll)
			polled = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			polled = true
		case <-d.wake:
		}
	}
}

// dispatch claims what each endpoint has room for and attempts it.
func (d *Dispatcher) dispatch(ctx context.Context) {
	for _, ep := range d.refs {
		if !d.claimAndAttempt(ctx, ep, PerEndpoint, store.ClaimDeliveries{Endpoints: []string{ep}}, "claim webhook deliveries") {
			return
		}
	}
	if d.cfg.Push != nil {
		d.claimAndAttempt(ctx, pushBusy, PushConcurrency, store.ClaimDeliveries{Push: true}, "claim push notifications")
	}
}

// claimAndAttempt claims the due deliveries of c for which key (an
// endpoint, or all push notifications) has room under limit, and attempts
// each in its own goroutine. It reports false when the claim failed.
func (d *Dispatcher) claimAndAttempt(ctx context.Context, key string, limit int, c store.ClaimDeliveries, what string) bool {
	d.mu.Lock()
	free := limit - d.busy[key]
	d.mu.Unlock()
	if free <= 0 {
		return true
	}
	now := clock.Or(d.cfg.Clock).Now()
	c.Owner, c.Now, c.LeaseUntil, c.Limit = d.owner, now, now.Add(3*DefaultTimeout), free
	ds, err := d.cfg.Store.ClaimDeliveries(ctx, c)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Logger.Warn(what, "err", err)
		}
		return false
	}
	for _, dl := range ds {
		d.mu.Lock()
		d.busy[key]++
		d.mu.Unlock()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.attempt(ctx, dl)
			d.mu.Lock()
			d.busy[key]--
			d.mu.Unlock()
			d.Wake() // room again: more may be due
		}()
	}
	return true
}

// attempt posts one delivery and records the outcome.
func (d *Dispatcher) attempt(ctx context.Context, dl store.Delivery) {
	post := d.post
	if strings.HasPrefix(dl.Endpoint, store.PushEndpointPrefix) {
		post = d.postPush
	}
	status, err := post(ctx, dl)
	if ctx.Err() != nil {
		return // stopping: the lease lapses and the delivery is attempted again
	}
	now := clock.Or(d.cfg.Clock).Now()
	a := store.DeliveryAttempt{ID: dl.ID, Endpoint: dl.Endpoint, Owner: d.owner, At: now, HTTPStatus: status}
	switch {
	case err == nil && status >= 200 && status < 300:
		a.Delivered = true
	default:
		if err != nil {
			a.Error = err.Error()
		} else {
			a.Error = strconv.Itoa(status) + " " + http.StatusText(status)
		}
		if dl.Attempts < len(d.cfg.Schedule) && !errors.Is(err, errGone) {
			a.NextAt = now.Add(d.cfg.Schedule[dl.Attempts])
		}
		d.cfg.Logger.Warn("webhook delivery failed", "id", dl.ID, "type", dl.Type, "endpoint", d.endpointName(dl.Endpoint),
			"attempt", dl.Attempts+1, "err", a.Error, "next", a.NextAt)
	}
	if err := d.cfg.Store.RecordAttempt(context.WithoutCancel(ctx), a); err != nil {
		d.cfg.Logger.Warn("record webhook attempt", "id", dl.ID, "err", err)
	}
}

// post sends the delivery and returns the endpoint's status.
func (d *Dispatcher) post(ctx context.Context, dl store.Delivery) (status int, err error) {
	endpoint := d.urls[dl.Endpoint]
	if d.tracer != nil {
		var span trace.Span
		ctx, span = d.startSpan(ctx, dl, endpoint)
		defer func() { endSpan(span, status, err) }()
	}
	body, err := Body(d.cfg.Format, d.cfg.PublicURL, dl.Notice)
	if err != nil {
		return 0, err
	}
	return d.send(ctx, d.cfg.Client, endpoint, dl.ID, body, "application/json", "Stackbone-Webhooks/", nil)
}

// send POSTs body to endpoint with client: the content type, the user
// agent (ua and the version), the Standard Webhooks headers for id (signed
// when a secret is set) and the extra headers. A failed request's error has
// the URL redacted (net/http masks only its password): the stored
// last_error and the log get it hidden.
func (d *Dispatcher) send(ctx context.Context, client *http.Client, endpoint, id string, body []byte, contentType, ua string, extra http.Header) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := clock.Or(d.cfg.Clock).Now()
	for k, v := range extra {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", ua+d.cfg.Version)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	if d.key != nil {
		req.Header.Set("webhook-signature", Sign(d.key, id, ts, body))
	}
	resp, err := client.Do(req)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), endpoint, config.Redact(endpoint))
		if req.URL.User != nil {
			msg = strings.ReplaceAll(msg, req.URL.Redacted(), config.Redact(endpoint))
		}
		if errors.Is(err, ssrf.ErrRefused) {
			msg = "refused: " + msg
		}
		return 0, errors.New(msg)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// startSpan starts the CLIENT span of one delivery attempt: "POST
// webhook {type}", with the HTTP client attributes (the URL without its
// credentials) and the notice's id, type and attempt.
func (d *Dispatcher) startSpan(ctx context.Context, dl store.Delivery, endpoint string) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(http.MethodPost),
		semconv.URLFullKey.String(config.Redact(endpoint)), attribute.String("webhook.id", dl.ID),
		attribute.String("webhook.type", dl.Type), semconv.HTTPRequestResendCountKey.Int(dl.Attempts)}
	if u, err := url.Parse(endpoint); err == nil {
		attrs = append(attrs, semconv.ServerAddressKey.String(u.Hostname()))
		if p, err := strconv.Atoi(u.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPortKey.Int(p))
		}
	}
	if dl.TraceParent != "" {
		// The run (or the decision) that stored the notice: its trace
		// goes on, however much later and wherever it is delivered.
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": dl.TraceParent})
	}
	return d.tracer.Start(ctx, "POST webhook "+dl.Type, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan ends a delivery span with the endpoint's status; a transport
// error or a status other than 2xx fails it.
func endSpan(span trace.Span, status int, err error) {
	if status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCodeKey.Int(status))
	}
	switch {
	case err != nil:
		span.SetAttributes(semconv.ErrorTypeKey.String("delivery_error"))
		span.SetStatus(codes.Error, err.Error())
	case status < 200 || status > 299:
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, strconv.Itoa(status))
	}
	span.End()
}

// Sign is the Standard Webhooks signature header value of a message:
// "v1," and the base64 of HMAC-SHA256(key, id + "." + unix seconds + "." +
// body).
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// StudioURL is the Studio page of a notice's thread.
func StudioURL(publicURL string, data *store.NoticeData) string {
	if data.ThreadID == "" {
		return publicURL + "/studio/#/inbox"
	}
	return publicURL + "/studio/#/threads/" + data.ThreadID
}

// Body is the request body of a notice in the given format: the same bytes
// for every attempt.
//
// Standard: {"type", "timestamp", "data"} with data the notice's fields
// and studioUrl. Slack: {"text"} with a one-line summary and the link.
func Body(format, publicURL string, n store.Notice) ([]byte, error) {
	var data store.NoticeData
	if err := json.Unmarshal(n.Data, &data); err != nil {
		return nil, fmt.Errorf("notice %s: %w", n.ID, err)
	}
	link := StudioURL(publicURL, &data)
	if format == config.WebhookSlack {
		return json.Marshal(map[string]string{"text": Summary(n.Type, &data) + " <" + link + "|Open in Studio>"})
	}
	out := struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{n.Type, n.At.UTC(), withStudioURL(n.Data, link)}
	return json.Marshal(out)
}

// withStudioURL adds "studioUrl" to a notice's data object.
func withStudioURL(data json.RawMessage, link string) json.RawMessage {
	l, _ := json.Marshal(link)
	d := bytes.TrimSpace(data)
	if len(d) < 2 || d[len(d)-1] != '}' {
		return data
	}
	out := append([]byte{}, d[:len(d)-1]...)
	if len(bytes.TrimSpace(d[1:len(d)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"studioUrl":`...)
	out = append(out, l...)
	return append(out, '}')
}

// Summary is a one-line description of a notice, for chat formats.
func Summary(typ string, d *store.NoticeData) string {
	where := fmt.Sprintf("agent %s, thread %s", d.Agent, d.ThreadID)
	switch typ {
	case store.NoticeDecisionPending:
		s := fmt.Sprintf("Approval needed: %s (%s)", d.Tool, where)
		if d.Description != "" {
			s += ": " + d.Description
		}
		return s
	case store.NoticeDecisionDecided:
		verb := "rejected"
		if d.Decision != nil && d.Decision.Approved {
			verb = "approved"
		}
		by := ""
		if d.Decision != nil && d.Decision.By != "" {
			by = " by " + d.Decision.By
		}
		return fmt.Sprintf("%s %s%s (%s)", d.Tool, verb, by, where)
	case store.NoticeDecisionExpired:
		return fmt.Sprintf("Approval of %s expired (%s)", d.Tool, where)
	case store.NoticeRunFailed:
		return fmt.Sprintf("Run failed (%s): %s", where, d.Error)
	case store.NoticeBudgetExceeded:
		return fmt.Sprintf("Budget %s is spent: turns are refused until it resets (agent %s)", d.Budget, d.Agent)
	}
	return fmt.Sprintf("Run completed (%s)", where)
}
