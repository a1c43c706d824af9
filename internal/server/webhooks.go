package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// Delivery is a webhook delivery as GET /v1/webhooks/deliveries shows it:
// the endpoint with its query and user info hidden.
type Delivery struct {
	ID          string               `json:"id"`
	Type        string               `json:"type"`
	CreatedAt   time.Time            `json:"createdAt"`
	Endpoint    string               `json:"endpoint"`
	Status      store.DeliveryStatus `json:"status"`
	Attempts    int                  `json:"attempts"`
	NextAt      *time.Time           `json:"nextAttemptAt,omitempty"`
	LastStatus  int                  `json:"lastStatus,omitempty"`
	LastError   string               `json:"lastError,omitempty"`
	DeliveredAt *time.Time           `json:"deliveredAt,omitempty"`
	Data        json.RawMessage      `json:"data"`
}

// DeliveryList is the answer of GET /v1/webhooks/deliveries.
type DeliveryList struct {
	Object string     `json:"object"`
	Data   []Delivery `json:"data"`
	// Endpoints are the configured endpoints (hidden as Endpoint is); none
	// means webhooks are off.
	Endpoints []string `json:"endpoints"`
}

// listDeliveries lists the tenant's recent webhook deliveries, newest
// first.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	items, err := s.Store.ListDeliveries(r.Context(), PrincipalFrom(r.Context()).Tenant, limit)
	if err != nil {
		return err
	}
	out := DeliveryList{Object: "list", Data: make([]Delivery, 0, len(items)), Endpoints: []string{}}
	shown := map[string]string{} // a row's endpoint reference -> the URL as shown
	for _, e := range s.Config.WebhookURLs {
		shown[store.WebhookRef(e)] = config.Redact(e)
	}
	for _, d := range items {
		endpoint, ok := shown[d.Endpoint]
		switch {
		case ok:
		case store.LegacyEndpoint(d.Endpoint): // never shown in clear
			endpoint = config.Redact(d.Endpoint)
		default:
			endpoint = d.Endpoint // an endpoint no longer configured: its reference
		}
		v := Delivery{ID: d.ID, Type: d.Type, CreatedAt: d.At, Endpoint: endpoint, Status: d.Status,
			Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, DeliveredAt: d.DeliveredAt, Data: d.Data}
		if d.Status == store.DeliveryPending {
			next := d.NextAt
			v.NextAt = &next
		}
		out.Data = append(out.Data, v)
	}
	for _, e := range s.Config.WebhookURLs {
		out.Endpoints = append(out.Endpoints, config.Redact(e))
	}
	return httpjson.Write(w, http.StatusOK, out)
}
