package notify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/ssrf"
	"github.com/stackbone/stackbone/internal/store"
)

// PushConcurrency is how many A2A push notifications are attempted at
// once (all their URLs together).
const PushConcurrency = 8

// PushTokenHeader carries a push config's token in each notification (A2A
// 1.0, section 6.6).
const PushTokenHeader = "X-A2A-Notification-Token"

// pushBusy is the busy count key of the push deliveries.
const pushBusy = store.PushEndpointPrefix

// PushConfigs reads the A2A push notification configs (store.PushStore).
type PushConfigs interface {
	GetPushConfig(ctx context.Context, tenant, taskID, id string) (*store.PushConfig, error)
}

// errGone is the error of a delivery whose config was deleted: it is
// failed without retries.
var errGone = errors.New("the push notification config was deleted")

// endpointName is how a log line names a delivery's endpoint: a
// configured webhook's URL redacted, or the push config's reference.
func (d *Dispatcher) endpointName(ep string) string {
	if u, ok := d.urls[ep]; ok {
		return config.Redact(u)
	}
	return ep
}

// dispatchPush claims the due A2A push deliveries there is room for and
// attempts them.
func (d *Dispatcher) dispatchPush(ctx context.Context) {
	d.mu.Lock()
	free := PushConcurrency - d.busy[pushBusy]
	d.mu.Unlock()
	if free <= 0 {
		return
	}
	now := clock.Or(d.cfg.Clock).Now()
	ds, err := d.cfg.Store.ClaimDeliveries(ctx, store.ClaimDeliveries{Push: true, Owner: d.owner, Now: now,
		LeaseUntil: now.Add(3 * DefaultTimeout), Limit: free})
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Logger.Warn("claim push notifications", "err", err)
		}
		return
	}
	for _, dl := range ds {
		d.mu.Lock()
		d.busy[pushBusy]++
		d.mu.Unlock()
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.attempt(ctx, dl)
			d.mu.Lock()
			d.busy[pushBusy]--
			d.mu.Unlock()
			d.Wake()
		}()
	}
}

// postPush sends an A2A push notification: the stored StreamResponse as
// the body (application/a2a+json), the config's token in
// X-A2A-Notification-Token, its authentication as the Authorization
// header, and the Standard Webhooks headers (signed when a secret is set).
func (d *Dispatcher) postPush(ctx context.Context, dl store.Delivery) (status int, err error) {
	id := strings.TrimPrefix(dl.Endpoint, store.PushEndpointPrefix)
	c, err := d.cfg.Push.GetPushConfig(ctx, dl.Tenant, "", id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, errGone
	}
	if err != nil {
		return 0, err
	}
	if d.tracer != nil {
		var span trace.Span
		ctx, span = d.startSpan(ctx, dl, c.URL)
		defer func() { endSpan(span, status, err) }()
	}
	body := []byte(dl.Data)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := clock.Or(d.cfg.Clock).Now()
	req.Header.Set("Content-Type", "application/a2a+json")
	req.Header.Set("User-Agent", "Stackbone-A2A/"+d.cfg.Version)
	req.Header.Set("webhook-id", dl.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	if d.key != nil {
		req.Header.Set("webhook-signature", Sign(d.key, dl.ID, ts, body))
	}
	if c.Token != "" {
		req.Header.Set(PushTokenHeader, c.Token)
	}
	if c.AuthScheme != "" {
		v := c.AuthScheme
		if c.AuthCredentials != "" {
			v += " " + c.AuthCredentials
		}
		req.Header.Set("Authorization", v)
	}
	resp, err := d.cfg.PushClient.Do(req)
	if err != nil {
		// The error quotes the URL: the stored error and the log get it
		// redacted; a refused address says so.
		msg := strings.ReplaceAll(err.Error(), c.URL, config.Redact(c.URL))
		if errors.Is(err, ssrf.ErrRefused) {
			msg = "refused: " + msg
		}
		return 0, errors.New(msg)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
