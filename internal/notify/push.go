package notify

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/stackbone/stackbone/internal/config"
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
	h := http.Header{}
	if c.Token != "" {
		h.Set(PushTokenHeader, c.Token)
	}
	if c.AuthScheme != "" {
		v := c.AuthScheme
		if c.AuthCredentials != "" {
			v += " " + c.AuthCredentials
		}
		h.Set("Authorization", v)
	}
	return d.send(ctx, d.cfg.PushClient, c.URL, dl.ID, []byte(dl.Data), "application/a2a+json", "Stackbone-A2A/", h)
}
