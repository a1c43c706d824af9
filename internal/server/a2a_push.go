package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/ssrf"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/a2a"
)

// Bounds of a push notification config's fields.
const (
	maxPushTokenBytes       = 1024
	maxPushSchemeBytes      = 64
	maxPushCredentialsBytes = 4096
)

// A2A push notifications: a client registers a URL per task
// (CreateTaskPushNotificationConfig, or SendMessage's configuration); the
// transactions that write the task's status events queue one outbox
// delivery per config (store.PushStore), which the webhook dispatcher
// POSTs with the config's token and authentication (notify.postPush).
// Configs are read through the task, so another tenant's (or another
// user's) task is TaskNotFound, as for every task operation.

// pushConfigOf checks a config a client sent and returns it as stored for
// task t (its id the client's, or a new one).
func (c *a2aCall) pushConfigOf(ctx context.Context, in *a2a.TaskPushNotificationConfig, prefix string) (store.PushConfig, error) {
	bad := func(field, format string, args ...any) error {
		field = prefix + field
		msg := fmt.Sprintf(format, args...)
		return &a2a.Error{Code: a2a.CodeInvalidParams, Message: msg, Reason: "invalid_push_config",
			Details: []any{map[string]any{"@type": "type.googleapis.com/google.rpc.BadRequest",
				"fieldViolations": []map[string]string{{"field": field, "description": msg}}}}}
	}
	out := store.PushConfig{Tenant: c.p.Tenant, ID: in.ID, URL: strings.TrimSpace(in.URL), Token: in.Token}
	if out.URL == "" {
		return out, bad("url", "The push notification config needs a url.")
	}
	if err := ssrf.CheckURL(ctx, out.URL, c.s.Config.A2APushAllowPrivate, nil); err != nil {
		if errors.Is(err, ssrf.ErrRefused) {
			return out, bad("url", "The push notification url is refused: %v (push notifications go to public addresses only).", err)
		}
		return out, bad("url", "Invalid push notification url: %v.", err)
	}
	if len(out.Token) > maxPushTokenBytes || strings.ContainsAny(out.Token, "\r\n\x00") {
		return out, bad("token", "The push notification token is at most %d bytes, on one line.", maxPushTokenBytes)
	}
	if a := in.Authentication; a != nil {
		out.AuthScheme, out.AuthCredentials = strings.TrimSpace(a.SchemeName()), a.Credentials
		if out.AuthScheme == "" || len(out.AuthScheme) > maxPushSchemeBytes || strings.ContainsAny(out.AuthScheme, " \t\r\n\x00\",;") {
			return out, bad("authentication.scheme", "authentication.scheme is an HTTP authentication scheme such as Bearer or Basic (at most %d bytes).", maxPushSchemeBytes)
		}
		if len(out.AuthCredentials) > maxPushCredentialsBytes || strings.ContainsAny(out.AuthCredentials, "\r\n\x00") {
			return out, bad("authentication.credentials", "authentication.credentials is at most %d bytes, on one line.", maxPushCredentialsBytes)
		}
	}
	if out.ID == "" {
		out.ID = c.s.Runner.NewID("push")
	} else if err := apierror.CheckID(prefix+"id", out.ID); err != nil {
		return out, err
	}
	return out, nil
}

// storePushConfig stores config pc for task t (id taskID).
func (c *a2aCall) storePushConfig(ctx context.Context, t *a2aTask, taskID string, pc store.PushConfig) (store.PushConfig, error) {
	pc.TaskID, pc.ThreadID, pc.TurnSeq = taskID, t.th.ID, t.turnSeq
	err := c.s.Store.CreatePushConfig(ctx, pc)
	switch {
	case errors.Is(err, store.ErrPushConfigLimit):
		return pc, a2a.Errorf(a2a.CodeInvalidParams, "Task %q has %d push notification configs already: delete one first.", pc.TaskID, store.MaxPushConfigs)
	case errors.Is(err, store.ErrPushConfigTaken):
		return pc, a2a.Errorf(a2a.CodeInvalidParams, "The push notification config id %q is another task's.", pc.ID)
	case err != nil:
		return pc, err
	}
	stored, err := c.s.Store.GetPushConfig(ctx, pc.Tenant, pc.TaskID, pc.ID)
	if err != nil {
		return pc, err
	}
	return *stored, nil
}

// pushConfigJSON is a stored config as A2A answers it: the credentials of
// its authentication are not sent back.
func pushConfigJSON(pc *store.PushConfig) a2a.TaskPushNotificationConfig {
	out := a2a.TaskPushNotificationConfig{ID: pc.ID, TaskID: pc.TaskID, URL: pc.URL, Token: pc.Token}
	if pc.AuthScheme != "" {
		out.Authentication = &a2a.AuthenticationInfo{Scheme: pc.AuthScheme}
	}
	return out
}

// createPushConfig is CreateTaskPushNotificationConfig.
func (c *a2aCall) createPushConfig(params json.RawMessage) error {
	var req a2a.TaskPushNotificationConfig
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	if err := c.p.Allow(ActTurn, ""); err != nil {
		return err
	}
	ctx := c.r.Context()
	t, err := c.task(ctx, req.TaskID)
	if err != nil {
		return err
	}
	pc, err := c.pushConfigOf(ctx, &req, "")
	if err != nil {
		return err
	}
	if pc, err = c.storePushConfig(ctx, t, req.TaskID, pc); err != nil {
		return err
	}
	return c.result(pushConfigJSON(&pc))
}

// getPushConfig is GetTaskPushNotificationConfig.
func (c *a2aCall) getPushConfig(params json.RawMessage) error {
	var req a2a.PushConfigRequest
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	ctx := c.r.Context()
	if _, err := c.task(ctx, req.TaskID); err != nil {
		return err
	}
	if req.ID == "" {
		return a2a.Errorf(a2a.CodeInvalidParams, "The push notification config id is required.")
	}
	pc, err := c.s.Store.GetPushConfig(ctx, c.p.Tenant, req.TaskID, req.ID)
	if errors.Is(err, store.ErrNotFound) {
		return &a2a.Error{Code: a2a.CodeTaskNotFound, Message: fmt.Sprintf("Task %q has no push notification config %q.", req.TaskID, req.ID),
			Metadata: map[string]string{"taskId": req.TaskID, "id": req.ID}}
	}
	if err != nil {
		return err
	}
	return c.result(pushConfigJSON(pc))
}

// listPushConfigs is ListTaskPushNotificationConfigs: every config of the
// task (a task holds store.MaxPushConfigs at most: one page).
func (c *a2aCall) listPushConfigs(params json.RawMessage) error {
	var req a2a.PushConfigRequest
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	if req.PageSize != nil && *req.PageSize < 0 {
		return a2a.Errorf(a2a.CodeInvalidParams, "pageSize must not be negative.")
	}
	ctx := c.r.Context()
	if _, err := c.task(ctx, req.TaskID); err != nil {
		return err
	}
	pcs, err := c.s.Store.ListPushConfigs(ctx, c.p.Tenant, req.TaskID)
	if err != nil {
		return err
	}
	out := a2a.ListTaskPushNotificationConfigsResponse{Configs: []a2a.TaskPushNotificationConfig{}}
	for i := range pcs {
		out.Configs = append(out.Configs, pushConfigJSON(&pcs[i]))
	}
	return c.result(out)
}

// deletePushConfig is DeleteTaskPushNotificationConfig: idempotent (a
// config already deleted is no error), its notifications not yet sent are
// dropped.
func (c *a2aCall) deletePushConfig(params json.RawMessage) error {
	var req a2a.PushConfigRequest
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	if err := c.p.Allow(ActTurn, ""); err != nil {
		return err
	}
	ctx := c.r.Context()
	if _, err := c.task(ctx, req.TaskID); err != nil {
		return err
	}
	if req.ID == "" {
		return a2a.Errorf(a2a.CodeInvalidParams, "The push notification config id is required.")
	}
	if err := c.s.Store.DeletePushConfig(ctx, c.p.Tenant, req.TaskID, req.ID); err != nil {
		return err
	}
	return c.result(struct{}{})
}

// inlinePush stores the push config a SendMessage brought for the task
// its message started (or answered), then reads the task again: a status
// it reached before the config was stored (a quick task, done already) is
// queued for the config at once, so the client hears of it.
func (c *a2aCall) inlinePush(ctx context.Context, taskID string, pc store.PushConfig) error {
	t, err := c.task(ctx, taskID)
	if err != nil {
		return err
	}
	if pc, err = c.storePushConfig(ctx, t, taskID, pc); err != nil {
		return err
	}
	if t, err = c.task(ctx, taskID); err != nil {
		return err
	}
	if st := t.tr.State(); !st.Terminal() && !st.Interrupted() {
		return nil
	}
	task := t.tr.Task(nil, false)
	body, err := json.Marshal(a2a.StreamResponse{StatusUpdate: &a2a.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: task.Status}})
	if err != nil {
		return err
	}
	return c.s.Store.QueuePush(ctx, pc.Tenant, pc.ID, body)
}
