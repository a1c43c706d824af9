package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/stackbone/stackbone/internal/event"
)

// ErrPushConfigLimit: the task has MaxPushConfigs push notification
// configs already.
var ErrPushConfigLimit = errors.New("too many push notification configs for the task")

// ErrPushConfigTaken: the tenant has a push notification config of that
// id for another task.
var ErrPushConfigTaken = errors.New("the push notification config id is taken by another task")

// MaxPushConfigs is how many push notification configs one task holds at
// most.
const MaxPushConfigs = 10

// NoticeA2APush is the type of an outbox row that is an A2A push
// notification (its endpoint a PushEndpoint, its data the request body).
const NoticeA2APush = "a2a.push"

// PushEndpointPrefix starts the endpoint of every A2A push delivery: the
// config's id follows.
const PushEndpointPrefix = "a2a:"

// PushTaskID is the placeholder of the task id in a PushEncoder's body:
// each config's delivery gets its own task id written in its place.
const PushTaskID = "{{a2a.taskId}}"

// PushEndpoint is the outbox endpoint of the deliveries to a push config.
func PushEndpoint(configID string) string { return PushEndpointPrefix + configID }

// PushConfig is an A2A push notification config: where to POST the
// status updates of one task (a turn of a thread, named by its first run).
type PushConfig struct {
	Tenant string
	ID     string
	TaskID string
	// ThreadID and TurnSeq place the task: the thread and the first event
	// of its turn.
	ThreadID string
	TurnSeq  int64
	URL      string
	// Token is the client's token, sent back with each notification.
	Token string
	// AuthScheme and AuthCredentials are the Authorization header each
	// notification carries ("" scheme: none).
	AuthScheme      string
	AuthCredentials string
	CreatedAt       time.Time
}

// PushEncoder is the body of the push notification an event of a thread's
// turn yields (a task status change), with PushTaskID wherever the task id
// goes; ok false for an event that yields none. The A2A wire sets it
// (SetPushEncoder): the store knows no A2A.
type PushEncoder func(contextID string, e event.Event) (body []byte, ok bool)

// PushStore holds the A2A push notification configs. The transactions
// that write a turn's events (BeginRun, Checkpoint, FinishRun) queue, for
// each event the PushEncoder encodes, one outbox delivery per config of
// the thread's current turn, in the same transaction.
type PushStore interface {
	// SetPushEncoder sets the encoder of push notification bodies (nil:
	// none are queued). Call it before the store is used.
	SetPushEncoder(enc PushEncoder)
	// CreatePushConfig stores c (CreatedAt now when zero):
	// ErrPushConfigLimit when its task has MaxPushConfigs already. A
	// config of the same tenant, task and id is replaced (the client
	// updates it); ErrPushConfigTaken when the id is another task's. It
	// takes the thread's row lock: a transaction writing the turn's events
	// either committed before it (its status is read after) or queues a
	// delivery for the config.
	CreatePushConfig(ctx context.Context, c PushConfig) error
	// GetPushConfig returns the config id of the tenant's task taskID
	// (ErrNotFound when there is none; taskID "" matches any task).
	GetPushConfig(ctx context.Context, tenant, taskID, id string) (*PushConfig, error)
	// ListPushConfigs lists the configs of the tenant's task, oldest first.
	ListPushConfigs(ctx context.Context, tenant, taskID string) ([]PushConfig, error)
	// QueuePush queues one push notification to config id of the tenant
	// (nothing when there is none), body as an encoded one.
	QueuePush(ctx context.Context, tenant, id string, body []byte) error
	// DeletePushConfig deletes the config and its pending deliveries;
	// deleting one that is not there is no error (idempotent).
	DeletePushConfig(ctx context.Context, tenant, taskID, id string) error
}

// pushStatusEvent reports whether e may change a task's status: only
// those go to the encoder.
func pushStatusEvent(e event.Event) bool {
	return e.Type == event.RunStarted || e.Type == event.RunFinished || e.Type == event.RunError
}

// validPushBody reports whether a body is a JSON object.
func validPushBody(b []byte) bool {
	return len(b) > 1 && b[0] == '{' && json.Valid(b)
}
