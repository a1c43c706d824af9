package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// TestWebhookDeliveriesPerTenant: GET /v1/webhooks/deliveries lists only
// the caller's tenant's deliveries, with the endpoint's token hidden; a bad
// limit is a 400 in the OpenAI error envelope.
func TestWebhookDeliveriesPerTenant(t *testing.T) {
	t.Parallel()
	keys := []config.Key{{Tenant: "acme", Secret: "sk-acme-0001", Role: config.RoleCaller, Label: "acme"},
		{Tenant: "beta", Secret: "sk-beta-0001", Role: config.RoleAdmin, Label: "beta"}}
	env := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: keys, Configure: func(c *config.Config) {
		c.WebhookURLs = []string{"http://127.0.0.1:9/hook?token=hunter22"}
		c.WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}})
	pauseAs(t, env, "sk-acme-0001", "wh-1")
	type page struct {
		Data []struct {
			Type, Status, Endpoint string
			Data                   struct{ ThreadID, Tool string }
		}
		Endpoints []string
	}
	list := func(key string) page {
		t.Helper()
		r := call(t, "GET", env.URL+"/v1/webhooks/deliveries", "", "Authorization", "Bearer "+key)
		var p page
		if r.status != 200 || json.Unmarshal(r.body, &p) != nil {
			t.Fatalf("deliveries: %d %s", r.status, r.body)
		}
		if strings.Contains(string(r.body), "hunter22") {
			t.Fatalf("the endpoint's token is shown: %s", r.body)
		}
		return p
	}
	a := list("sk-acme-0001")
	if len(a.Data) != 1 || a.Data[0].Type != "decision.pending" || a.Data[0].Status != "pending" ||
		a.Data[0].Data.ThreadID != "wh-1" || a.Data[0].Data.Tool != "refund" || a.Data[0].Endpoint != "http://127.0.0.1:9/hook?…" ||
		len(a.Endpoints) != 1 {
		t.Fatalf("acme's deliveries: %+v", a)
	}
	if b := list("sk-beta-0001"); len(b.Data) != 0 {
		t.Fatalf("beta sees acme's deliveries: %+v", b)
	}
	r := call(t, "GET", env.URL+"/v1/webhooks/deliveries?limit=0", "", "Authorization", "Bearer sk-acme-0001")
	if r.status != 400 || !strings.Contains(string(r.body), `"param":"limit"`) {
		t.Fatalf("a bad limit: %d %s", r.status, r.body)
	}
}
