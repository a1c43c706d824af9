package studio_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/notify"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestWebhooksPage: Studio's Webhooks page lists the tenant's deliveries
// with their status: a decision.pending whose first attempt the endpoint
// refused (503) shows as retrying, then as delivered once the retry
// succeeds. The endpoint's token is never shown.
func TestWebhooksPage(t *testing.T) {
	t.Parallel()
	var up atomic.Bool
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rcv.Close)
	hook := rcv.URL + "/hook?token=s3cr3t-token"
	env := stacktest.New(t, stacktest.Options{Configure: func(c *config.Config) {
		c.WebhookURLs = []string{hook}
		c.WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}})
	// Retries every 200 ms, so the page sees the delivery retrying, then
	// delivered once the endpoint is up.
	schedule := make([]time.Duration, 1000)
	for i := range schedule {
		schedule[i] = 200 * time.Millisecond
	}
	d, err := notify.New(notify.Config{Store: env.Store, Endpoints: env.Config.WebhookURLs, Secret: env.Config.WebhookSecret,
		Poll: 20 * time.Millisecond, PublicURL: env.URL, Schedule: schedule})
	if err != nil {
		t.Fatal(err)
	}
	go d.Run(t.Context())

	p := newPage(t)
	p.open(env.URL + "/studio/#/webhooks")
	p.waitText("#wh-endpoints", "Delivering to "+rcv.URL+"/hook?…")
	pause(t, env, "", "refund-wh", "please refund my order")
	row := `tr[data-status="pending"]`
	p.waitText(row+" th code", "decision.pending")
	p.waitText(row+" .delivery-status", "retrying (503 Service Unavailable)")
	p.waitText(row+" td a", "refund-wh")
	if html := eval[string](p, `document.querySelector('main').innerHTML`); strings.Contains(html, "s3cr3t-token") {
		t.Fatalf("the endpoint's token is on the page")
	}
	// The endpoint comes up: the next retry is delivered.
	up.Store(true)
	p.waitText(`tr[data-status="delivered"] .delivery-status`, "delivered")
	p.waitText(`tr[data-status="delivered"] th code`, "decision.pending")
}
