package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/schedule"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// Scheduler runs a schedule at once (POST /v1/schedules/{id}/run).
type Scheduler interface {
	RunNow(ctx context.Context, tenant, id string) (*store.Firing, error)
}

// ScheduleView is a schedule as the API shows it; GET /v1/schedules/{id}
// adds its latest firings.
type ScheduleView struct {
	Object string `json:"object"`
	store.Schedule
	Firings []store.Firing `json:"firings,omitempty"`
}

// FiringView is a firing as POST /v1/schedules/{id}/run answers it.
type FiringView struct {
	Object string `json:"object"`
	store.Firing
}

// ScheduleRequest is the body of POST /v1/schedules and PATCH
// /v1/schedules/{id} (where every field is optional; agent cannot change).
type ScheduleRequest struct {
	Name     *string `json:"name"`
	Agent    *string `json:"agent"`
	Cron     *string `json:"cron"`
	Timezone *string `json:"timezone"`
	Input    *string `json:"input"`
	Thread   *string `json:"thread"`
	CatchUp  *string `json:"catchUp"`
	Key      *string `json:"key"`
	Enabled  *bool   `json:"enabled"`
}

func (s *Server) scheduleRoutes() {
	s.Handle("GET /v1/schedules", WireOpenAI, true, s.listSchedules)
	s.Handle("POST /v1/schedules", WireOpenAI, true, admin(s.createSchedule))
	s.Handle("GET /v1/schedules/{id}", WireOpenAI, true, s.getSchedule)
	s.Handle("PATCH /v1/schedules/{id}", WireOpenAI, true, admin(s.patchSchedule))
	s.Handle("DELETE /v1/schedules/{id}", WireOpenAI, true, admin(s.deleteSchedule))
	s.Handle("POST /v1/schedules/{id}/run", WireOpenAI, true, admin(s.runSchedule))
}

// admin is the role check of the routes that change schedules (requires
// ActAdmin).
func admin(h HandlerFunc) HandlerFunc { return requires(ActAdmin, h) }

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	items, err := s.Store.ListSchedules(r.Context(), PrincipalFrom(r.Context()).Tenant)
	if err != nil {
		return err
	}
	out := List[ScheduleView]{Object: "list", Data: make([]ScheduleView, 0, len(items))}
	for _, sc := range items {
		out.Data = append(out.Data, ScheduleView{Object: "schedule", Schedule: sc})
	}
	return httpjson.Write(w, http.StatusOK, out)
}

// firingsShown is how many latest firings GET /v1/schedules/{id} shows.
const firingsShown = 20

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	tenant := PrincipalFrom(r.Context()).Tenant
	sc, err := s.Store.GetSchedule(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return scheduleErr(err)
	}
	fs, err := s.Store.ListFirings(r.Context(), tenant, sc.ID, firingsShown)
	if err != nil {
		return err
	}
	if fs == nil {
		fs = []store.Firing{}
	}
	return httpjson.Write(w, http.StatusOK, ScheduleView{Object: "schedule", Schedule: *sc, Firings: fs})
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) error {
	var req ScheduleRequest
	if err := decodeRequired(r, &req); err != nil {
		return err
	}
	if req.Agent == nil || *req.Agent == "" {
		return apierror.Invalid("agent", "agent is required: the name of the agent the schedule runs.")
	}
	now := s.Now()
	sc := store.Schedule{Tenant: PrincipalFrom(r.Context()).Tenant, ID: ids.New("sch"), Agent: *req.Agent, Enabled: true,
		Source: store.ScheduleAPI, CreatedAt: now, UpdatedAt: now}
	if req.Cron == nil {
		return apierror.Invalid("cron", "cron is required: five fields (e.g. '0 9 * * 1-5') or a descriptor such as '@every 15m'.")
	}
	sc, err := s.defineSchedule(sc, req, now)
	if err != nil {
		return err
	}
	if err := s.Store.CreateSchedule(r.Context(), sc); err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusCreated, ScheduleView{Object: "schedule", Schedule: sc})
}

func (s *Server) patchSchedule(w http.ResponseWriter, r *http.Request) error {
	var req ScheduleRequest
	if err := decodeRequired(r, &req); err != nil {
		return err
	}
	tenant := PrincipalFrom(r.Context()).Tenant
	cur, err := s.Store.GetSchedule(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return scheduleErr(err)
	}
	if req.Agent != nil && *req.Agent != cur.Agent {
		return apierror.Invalid("agent", "A schedule's agent cannot change: create a schedule for the other agent.")
	}
	if cur.Source == store.ScheduleFile && (req.Name != nil || req.Cron != nil || req.Timezone != nil || req.Input != nil ||
		req.Thread != nil || req.CatchUp != nil || req.Key != nil) {
		return apierror.Invalid("", "This schedule is declared in the agent file of %q: change it there (only `enabled` can be set here).", cur.Agent)
	}
	now := s.Now()
	sc := *cur
	sc.UpdatedAt = now
	timing := req.Cron != nil || req.Timezone != nil || (req.Enabled != nil && *req.Enabled && !cur.Enabled)
	next := sc.NextAt
	sc, err = s.defineSchedule(sc, req, now)
	if err != nil {
		return err
	}
	if !timing && sc.Enabled {
		sc.NextAt = next // the next firing stays where it was
	}
	if err := s.Store.UpdateSchedule(r.Context(), sc); err != nil {
		return scheduleErr(err)
	}
	return httpjson.Write(w, http.StatusOK, ScheduleView{Object: "schedule", Schedule: sc})
}

// defineSchedule applies req to sc and checks the result (schedule.Define).
func (s *Server) defineSchedule(sc store.Schedule, req ScheduleRequest, now time.Time) (store.Schedule, error) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&sc.Name, req.Name)
	set(&sc.Cron, req.Cron)
	set(&sc.Timezone, req.Timezone)
	set(&sc.Input, req.Input)
	set(&sc.Thread, req.Thread)
	set(&sc.CatchUp, req.CatchUp)
	set(&sc.Key, req.Key)
	if req.Enabled != nil {
		sc.Enabled = *req.Enabled
	}
	if s.Agents.Get(sc.Agent) == nil {
		return sc, apierror.Invalid("agent", "No agent is named %q.", sc.Agent)
	}
	if sc.Key != "" && len(s.Config.Keys) > 0 && !slices.ContainsFunc(s.Config.Keys, func(k config.Key) bool {
		return k.Tenant == sc.Tenant && k.Label == sc.Key
	}) {
		return sc, apierror.Invalid("key", "The tenant has no API key labelled %q: name the label of one of its keys, or leave key out to run as the tenant's admin.", sc.Key)
	}
	out, err := schedule.Define(sc, now)
	var se *schedule.SpecError
	if errors.As(err, &se) {
		return sc, apierror.Invalid(se.Field, "%s", capitalize(se.Message)+".")
	}
	if err != nil {
		return sc, err
	}
	return out, nil
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	tenant := PrincipalFrom(r.Context()).Tenant
	cur, err := s.Store.GetSchedule(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		return scheduleErr(err)
	}
	if cur.Source == store.ScheduleFile {
		e := apierror.New(apierror.Conflict, "schedule_in_agent_file",
			fmt.Sprintf("This schedule is declared in the agent file of %q: remove it there, or disable it with PATCH {\"enabled\": false}.", cur.Agent))
		e.NoRetry = true
		return e
	}
	if err := s.Store.DeleteSchedule(r.Context(), tenant, cur.ID); err != nil {
		return scheduleErr(err)
	}
	return httpjson.Write(w, http.StatusOK, map[string]any{"id": cur.ID, "object": "schedule.deleted", "deleted": true})
}

func (s *Server) runSchedule(w http.ResponseWriter, r *http.Request) error {
	if s.Scheduler == nil {
		return apierror.New(apierror.Unavailable, "schedules_off", "This server runs no scheduler.")
	}
	f, err := s.Scheduler.RunNow(r.Context(), PrincipalFrom(r.Context()).Tenant, r.PathValue("id"))
	if err != nil {
		return scheduleErr(err)
	}
	return httpjson.Write(w, http.StatusAccepted, FiringView{Object: "schedule.firing", Firing: *f})
}

// scheduleErr names the missing thing of a schedule route's ErrNotFound.
func scheduleErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		e := apierror.New(apierror.NotFound, "schedule_not_found", "The tenant has no schedule with this id.")
		e.Err = err
		return e
	}
	return err
}

// decodeRequired decodes a JSON object body, refusing unknown fields and
// an empty body.
func decodeRequired(r *http.Request, v any) error {
	body, err := httpjson.ReadBody(r)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return apierror.Invalid("", "The request needs a JSON object body.")
	}
	if err := decodeStrict(body, v); err != nil {
		return apierror.Invalid("", "The request body is not valid: %v", err)
	}
	return nil
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// capitalize upper-cases the first letter of a message.
func capitalize(msg string) string {
	r, n := utf8.DecodeRuneInString(msg)
	if n == 0 {
		return msg
	}
	return string(unicode.ToUpper(r)) + strings.TrimSuffix(msg[n:], ".")
}
