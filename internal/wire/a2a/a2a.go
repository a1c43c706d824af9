// Package a2a is the Agent2Agent (A2A) 1.0 wire: the protocol's JSON shapes
// (ProtoJSON of specification/a2a.proto: camelCase fields, enums by their
// names), its JSON-RPC 2.0 envelope and error codes, and the Tracker that
// folds a run's engine events into a Task and its stream of status and
// artifact updates. The server (internal/server/a2a.go) maps A2A's
// operations onto threads (contextId) and turns (a task, named by the run
// that started it).
package a2a

import (
	"encoding/json"
	"strings"
)

// ProtocolVersion is the A2A version this wire speaks (Major.Minor).
const ProtocolVersion = "1.0"

// VersionHeader is the service parameter naming the client's A2A version
// (empty means 0.3).
const VersionHeader = "A2A-Version"

// SupportsVersion reports whether a client's A2A-Version (the header, or
// the request parameter of the same name) is one this wire speaks: 1.0
// (a patch number is ignored). Empty means 0.3, which it does not speak.
func SupportsVersion(v string) bool {
	v = strings.TrimSpace(v)
	return v == "1" || v == ProtocolVersion || strings.HasPrefix(v, ProtocolVersion+".")
}

// TaskState is a task's state (TASK_STATE_*).
type TaskState string

// The task states.
const (
	StateSubmitted     TaskState = "TASK_STATE_SUBMITTED"
	StateWorking       TaskState = "TASK_STATE_WORKING"
	StateCompleted     TaskState = "TASK_STATE_COMPLETED"
	StateFailed        TaskState = "TASK_STATE_FAILED"
	StateCanceled      TaskState = "TASK_STATE_CANCELED"
	StateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	StateRejected      TaskState = "TASK_STATE_REJECTED"
	StateAuthRequired  TaskState = "TASK_STATE_AUTH_REQUIRED"
)

// Terminal reports whether no more happens to a task in state s.
func (s TaskState) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled || s == StateRejected
}

// Interrupted reports whether a task in state s waits on its client.
func (s TaskState) Interrupted() bool { return s == StateInputRequired || s == StateAuthRequired }

// Role is a message's sender (ROLE_USER, ROLE_AGENT).
type Role string

// The roles.
const (
	RoleUser  Role = "ROLE_USER"
	RoleAgent Role = "ROLE_AGENT"
)

// Part is one piece of a message or artifact: exactly one of Text, Raw
// (bytes, base64 in JSON), URL or Data.
type Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       []byte          `json:"raw,omitempty"`
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TextPart is a part holding text.
func TextPart(s string) Part { return Part{Text: &s} }

// Message is one message of a conversation.
type Message struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             Role           `json:"role"`
	Parts            []Part         `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

// TaskStatus is a task's state with the message that goes with it.
type TaskStatus struct {
	State   TaskState `json:"state"`
	Message *Message  `json:"message,omitempty"`
	// Timestamp is ISO 8601 in UTC, milliseconds.
	Timestamp string `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// Task is a unit of work: here, one turn of a thread.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatusUpdateEvent is a task's new status, in a stream.
type TaskStatusUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskArtifactUpdateEvent is a piece of a task's artifact, in a stream:
// Append adds its parts' text to the artifact sent so far.
type TaskArtifactUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  Artifact       `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// StreamResponse is one event of a stream (and a push notification's
// payload): exactly one field is set. SendMessage's answer has the same
// shape with Task or Message.
type StreamResponse struct {
	Task           *Task                    `json:"task,omitempty"`
	Message        *Message                 `json:"message,omitempty"`
	StatusUpdate   *TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

// SendMessageConfiguration is how a client wants SendMessage answered.
type SendMessageConfiguration struct {
	AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
	HistoryLength       *int     `json:"historyLength,omitempty"`
	// ReturnImmediately answers at once with the task still working
	// (1.0.1); false waits for a terminal or interrupted state.
	ReturnImmediately bool `json:"returnImmediately,omitempty"`
	// Blocking is the pre-1.0.1 spelling (false: return immediately).
	Blocking                   *bool                       `json:"blocking,omitempty"`
	TaskPushNotificationConfig *TaskPushNotificationConfig `json:"taskPushNotificationConfig,omitempty"`
	// PushNotificationConfig is the spelling of the specification's
	// examples (and of 0.3).
	PushNotificationConfig *TaskPushNotificationConfig `json:"pushNotificationConfig,omitempty"`
}

// Push is the push notification config the client sent with its message
// (nil: none).
func (c *SendMessageConfiguration) Push() *TaskPushNotificationConfig {
	if c == nil {
		return nil
	}
	if c.TaskPushNotificationConfig != nil {
		return c.TaskPushNotificationConfig
	}
	return c.PushNotificationConfig
}

// Immediate reports whether the client asked for an answer before the
// task reached a terminal or interrupted state.
func (c *SendMessageConfiguration) Immediate() bool {
	return c != nil && (c.ReturnImmediately || (c.Blocking != nil && !*c.Blocking))
}

// SendMessageRequest is the params of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Tenant        string                    `json:"tenant,omitempty"`
	Message       *Message                  `json:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty"`
	Metadata      map[string]any            `json:"metadata,omitempty"`
}

// GetTaskRequest is the params of GetTask (and, without HistoryLength, of
// CancelTask and SubscribeToTask).
type GetTaskRequest struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

// ListTasksRequest is the params of ListTasks.
type ListTasksRequest struct {
	Tenant           string    `json:"tenant,omitempty"`
	ContextID        string    `json:"contextId,omitempty"`
	Status           TaskState `json:"status,omitempty"`
	PageSize         *int      `json:"pageSize,omitempty"`
	PageToken        string    `json:"pageToken,omitempty"`
	HistoryLength    *int      `json:"historyLength,omitempty"`
	IncludeArtifacts bool      `json:"includeArtifacts,omitempty"`
}

// ListTasksResponse is ListTasks' answer.
type ListTasksResponse struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"nextPageToken"`
	PageSize      int    `json:"pageSize"`
	TotalSize     int    `json:"totalSize"`
}

// AgentCard describes an agent (GET …/.well-known/agent-card.json).
type AgentCard struct {
	Name                 string                    `json:"name"`
	Description          string                    `json:"description"`
	SupportedInterfaces  []AgentInterface          `json:"supportedInterfaces"`
	Provider             *AgentProvider            `json:"provider,omitempty"`
	Version              string                    `json:"version"`
	DocumentationURL     string                    `json:"documentationUrl,omitempty"`
	Capabilities         AgentCapabilities         `json:"capabilities"`
	SecuritySchemes      map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	SecurityRequirements []SecurityRequirement     `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string                  `json:"defaultInputModes"`
	DefaultOutputModes   []string                  `json:"defaultOutputModes"`
	Skills               []AgentSkill              `json:"skills"`
}

// AgentInterface is one binding an agent is served on.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// The protocol bindings.
const (
	BindingJSONRPC  = "JSONRPC"
	BindingHTTPJSON = "HTTP+JSON"
)

// AgentProvider is who serves an agent.
type AgentProvider struct {
	URL          string `json:"url"`
	Organization string `json:"organization"`
}

// AgentCapabilities are the optional features an agent has.
type AgentCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
	ExtendedAgentCard bool `json:"extendedAgentCard"`
}

// SecurityScheme is one way to authenticate: HTTP auth (keys), or
// OpenID Connect (end users' tokens).
type SecurityScheme struct {
	HTTPAuthSecurityScheme      *HTTPAuthSecurityScheme      `json:"httpAuthSecurityScheme,omitempty"`
	OpenIDConnectSecurityScheme *OpenIDConnectSecurityScheme `json:"openIdConnectSecurityScheme,omitempty"`
}

// OpenIDConnectSecurityScheme names the OpenID provider whose access
// tokens the agent takes, by its discovery URL.
type OpenIDConnectSecurityScheme struct {
	Description      string `json:"description,omitempty"`
	OpenIDConnectURL string `json:"openIdConnectUrl"`
}

// HTTPAuthSecurityScheme is an Authorization header scheme (bearer).
type HTTPAuthSecurityScheme struct {
	Description  string `json:"description,omitempty"`
	Scheme       string `json:"scheme"`
	BearerFormat string `json:"bearerFormat,omitempty"`
}

// SecurityRequirement names the schemes a request must satisfy.
type SecurityRequirement struct {
	Schemes map[string]StringList `json:"schemes"`
}

// StringList is a list of scopes.
type StringList struct {
	List []string `json:"list"`
}

// AgentSkill is something an agent can do.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
}

// AuthenticationInfo is how a push notification authenticates: an HTTP
// Authorization scheme and its credentials.
type AuthenticationInfo struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
	// Schemes is the 0.3 spelling (and the 1.0 specification's example):
	// its first scheme is taken when Scheme is empty.
	Schemes []string `json:"schemes,omitempty"`
}

// SchemeName is the scheme to authenticate with.
func (a *AuthenticationInfo) SchemeName() string {
	if a.Scheme == "" && len(a.Schemes) > 0 {
		return a.Schemes[0]
	}
	return a.Scheme
}

// TaskPushNotificationConfig is where to POST a task's updates
// (CreateTaskPushNotificationConfig's params and result, SendMessage's
// configuration.taskPushNotificationConfig).
type TaskPushNotificationConfig struct {
	Tenant         string              `json:"tenant,omitempty"`
	ID             string              `json:"id,omitempty"`
	TaskID         string              `json:"taskId,omitempty"`
	URL            string              `json:"url"`
	Token          string              `json:"token,omitempty"`
	Authentication *AuthenticationInfo `json:"authentication,omitempty"`
}

// PushConfigRequest is the params of GetTaskPushNotificationConfig and
// DeleteTaskPushNotificationConfig (and, with PageSize and PageToken, of
// ListTaskPushNotificationConfigs).
type PushConfigRequest struct {
	Tenant    string `json:"tenant,omitempty"`
	TaskID    string `json:"taskId"`
	ID        string `json:"id,omitempty"`
	PageSize  *int   `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
}

// ListTaskPushNotificationConfigsResponse is
// ListTaskPushNotificationConfigs' answer.
type ListTaskPushNotificationConfigsResponse struct {
	Configs       []TaskPushNotificationConfig `json:"configs"`
	NextPageToken string                       `json:"nextPageToken"`
}
