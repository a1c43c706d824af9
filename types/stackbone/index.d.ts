// Type declarations for the 'stackbone' module that agent files import.
//
// The module itself is served by the stackbone binary when it bundles
// agents/*.ts; this file only exists so editors and `tsc --noEmit` can
// type-check agent files. See README.md next to it for the tsconfig.json.

/** A JSON Schema object (draft 2020-12). */
export type JSONSchema = { [key: string]: unknown };

/**
 * The Standard Schema interface (https://standardschema.dev) that zod 4,
 * valibot, arktype and others implement. Tool parameters given this way are
 * validated before `execute` runs, and `execute` receives the parsed output.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) =>
      | StandardSchemaV1.Result<Output>
      | Promise<StandardSchemaV1.Result<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

export declare namespace StandardSchemaV1 {
  type Result<Output> =
    | { readonly value: Output; readonly issues?: undefined }
    | { readonly issues: ReadonlyArray<Issue> };
  interface Issue {
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
  }
}

/** A schema for tool arguments or a state key: JSON Schema or a Standard Schema such as zod. */
export type Schema = JSONSchema | StandardSchemaV1<any, any>;

/** The argument type a schema describes: the parsed output for Standard Schemas, `any` for JSON Schema. */
export type InferArgs<S> = S extends StandardSchemaV1<any, infer O> ? O : any;

/** A human decision on a paused tool call. */
export type Decision = 'approve' | 'reject' | 'edit';

/** When and how calls of a tool wait for a human (durable sessions only). */
export type NeedsApproval<A> =
  | boolean
  | ((args: A) => boolean | Promise<boolean>)
  | {
      /** Decides per call; omitted means every call. `false` turns approval off. */
      when?: boolean | ((args: A) => boolean | Promise<boolean>);
      /** The text a reviewer sees. */
      description?: string | ((args: A) => string | Promise<string>);
      /** Defaults to ['approve', 'reject']. */
      allowedDecisions?: Decision[];
      /**
       * How long a pending approval waits ('30m', or milliseconds) before it
       * expires and is recorded as a rejection (decidedVia "expiry");
       * omitted means the server's STACKBONE_APPROVAL_TTL (default: never).
       */
      expiresAfter?: Duration;
      /**
       * A quorum: how many approvals from distinct principals (integer >= 1,
       * default 1) the call needs before it runs. One reject rejects it; an
       * edit resets the count to just the edit.
       */
      approvals?: number;
    };

/** Headers of a host fetch request or response (names are case-insensitive). */
export interface FetchHeaders extends Iterable<[string, string]> {
  get(name: string): string | null;
  has(name: string): boolean;
  set(name: string, value: string): void;
  append(name: string, value: string): void;
  delete(name: string): void;
  forEach(fn: (value: string, name: string) => void): void;
  entries(): IterableIterator<[string, string]>;
  keys(): IterableIterator<string>;
  values(): IterableIterator<string>;
}

/** Options of ctx.fetch. */
export interface FetchInit {
  method?: string;
  headers?: FetchHeaders | Record<string, string> | Array<[string, string]>;
  /** A string, bytes, URLSearchParams, or (not in the Fetch standard) a plain object sent as JSON. */
  body?: string | ArrayBuffer | ArrayBufferView | { toString(): string } | Record<string, unknown> | null;
}

/** What ctx.fetch resolves to. The body is read in full (at most 32 MiB). */
export interface FetchResponse {
  readonly status: number;
  readonly statusText: string;
  readonly ok: boolean;
  readonly url: string;
  readonly redirected: boolean;
  readonly headers: FetchHeaders;
  readonly bodyUsed: boolean;
  text(): Promise<string>;
  json<T = any>(): Promise<T>;
  arrayBuffer(): Promise<ArrayBuffer>;
  bytes(): Promise<Uint8Array>;
  clone(): FetchResponse;
}

/** The abort state of the running call. */
export interface CallSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  throwIfAborted(): void;
}

/** The second argument of `execute`. */
export interface ToolContext<State extends Record<string, any> = Record<string, any>> {
  /** HTTP from the host (runs in Go, cancelled with the call). */
  fetch(url: string | { href: string } | { url: string }, init?: FetchInit): Promise<FetchResponse>;
  /**
   * A mutable copy of the thread's shared state. What the tool changes (or a
   * whole new object assigned here) becomes the thread's new state.
   */
  state: State;
  /** The thread (session) id; empty in a stateless turn. */
  readonly threadId: string;
  /** The model's id for this call (unique within the thread). */
  readonly toolCallId: string;
  /**
   * The same for every attempt of this call (a retry, a run after a crash) and
   * different for every other call, even in another thread with the same
   * toolCallId: send it to a side effect's API (an `Idempotency-Key` header)
   * so a second attempt is recognised there.
   */
  readonly idempotencyKey: string;
  /** The name of the agent (or subagent) calling the tool. */
  readonly agent: string;
  /**
   * The end user whose turn calls the tool, from their access token (`sub` as
   * `id`; `email`, else `name`, else `sub` as `label`); null when an API key
   * started the turn.
   */
  readonly user: ToolUser | null;
  /**
   * The variables the agent lists in `env`, from the process environment, then
   * DIR/.env. Anything not listed (or set nowhere) is undefined. Values are
   * secrets: they are redacted from results, state, errors and logs.
   */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly signal: CallSignal;
  /**
   * The long-term memory store: JSON objects by namespace and key that
   * outlive the thread, scoped to the caller's tenant (see README "Memory").
   */
  readonly store: MemoryStore;
}

/** A namespace: a path of labels (non-empty, no "."), e.g. `['users', 'u1']`. */
export type Namespace = string[];

/** One item of the memory store. */
export interface MemoryItem<V extends Record<string, any> = Record<string, any>> {
  namespace: Namespace;
  key: string;
  value: V;
  /** RFC 3339 times. */
  createdAt: string;
  updatedAt: string;
  /** When the item expires (absent: never). */
  expiresAt?: string;
  /** Cosine similarity to the search query (semantic search only). */
  score?: number;
}

/** `ctx.store`: the tenant's long-term memory store. */
export interface MemoryStore {
  /**
   * Creates or replaces an item (a JSON object of at most 64 KiB). `ttl` is in
   * minutes, as LangGraph's store has it (default: never expires). With an
   * embedding model configured (stackbone.json `embeddings`) the text of the
   * `index` fields (dotted paths; default the whole value) is embedded for
   * semantic search; `index: false` stores no embedding.
   */
  put(namespace: Namespace, key: string, value: Record<string, any>, options?: { ttl?: number; index?: string[] | false }): Promise<void>;
  /** The item, or null. `refreshTtl` renews its TTL from now (refreshOnRead). */
  get(namespace: Namespace, key: string, options?: { refreshTtl?: boolean }): Promise<MemoryItem | null>;
  /** Deletes an item (a missing one is not an error). */
  delete(namespace: Namespace, key: string): Promise<void>;
  /**
   * The items under a namespace prefix: with `query`, by similarity when an
   * embedding model is configured (else those whose value contains it,
   * case-insensitively), otherwise latest first. `filter` keeps items whose
   * top-level fields equal its values. `limit` defaults to 10.
   */
  search(namespacePrefix: Namespace, options?: { query?: string; filter?: Record<string, unknown>; limit?: number; offset?: number; refreshTtl?: boolean }): Promise<MemoryItem[]>;
  /** The namespaces under a prefix, sorted; `maxDepth` cuts them to their first labels. */
  listNamespaces(prefix?: Namespace, options?: { suffix?: Namespace; maxDepth?: number; limit?: number; offset?: number }): Promise<Namespace[]>;
}

/** An end user, as tools see them (`ctx.user`). */
export interface ToolUser {
  /** The user's stable id: the access token's `sub`. */
  readonly id: string;
  /** How people know the user: the token's `email`, else `name`, else `sub`. */
  readonly label: string;
}

/**
 * What the project's `auth.ts` `authenticate(request)` is given: a request
 * no configured key (and no JWT, with an issuer) authenticated.
 */
export interface AuthRequest {
  readonly method: string;
  /** The URL path, e.g. `/v1/chat/completions`. */
  readonly path: string;
  /** The headers, names lower-case; several values of one name joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  /** The URL query, the first value of each name. */
  readonly query: Readonly<Record<string, string>>;
}

/**
 * What `authenticate(request)` returns (or resolves to) for a caller it
 * knows; `null` or `undefined` is no opinion (401), a throw a refusal (401,
 * with the thrown Error's message when it is one short line).
 */
export interface AuthResult {
  /** The caller's tenant. */
  tenant: string;
  /** The end user: their id, or `{ id, label }`; none: the tenant's caller, like a key. */
  user?: string | { id: string; label?: string };
  /** `caller` when absent. */
  role?: 'admin' | 'caller' | 'approver';
}

/** A tool definition: pass it to tool() or put it straight into `tools`. */
export interface ToolDef<S extends Schema = JSONSchema, A = InferArgs<S>> {
  /** What the tool does, for the model. */
  description?: string;
  /** The arguments: a JSON Schema with "type": "object", or a Standard Schema such as a zod object. */
  parameters?: S;
  /** An explicit JSON Schema for the model, e.g. `z.toJSONSchema(schema)` with zod/mini. */
  jsonSchema?: JSONSchema;
  /** Pause for a human before the call runs. */
  needsApproval?: NeedsApproval<A>;
  /** The call's time limit in milliseconds (default 60000). */
  timeoutMs?: number;
  /**
   * Running a call twice has the effect of running it once (given
   * `ctx.idempotencyKey`). After a crash that left a call without a result, an
   * idempotent tool is run again with the same key; any other call is "in
   * doubt" and waits for a human to retry or skip it. Default false.
   */
  idempotent?: boolean;
  /**
   * Runs the tool. A returned string is the result as is; anything else is
   * sent to the model as JSON. A thrown error's message becomes the tool error.
   */
  execute(args: A, ctx: ToolContext): unknown;
}

/** A helper agent the parent hands work to through the built-in `task` tool. */
export interface SubagentDef {
  name: string;
  description: string;
  instructions: string;
  /** "provider/model"; defaults to the parent's model. */
  model?: string;
  /** Names of the parent's tools it may use; omitted means all but `task`. */
  tools?: string[];
  /** Sampling settings laid over the parent's field by field (the timeouts are the parent's). */
  modelSettings?: SamplingSettings;
}

/** A provider/model string such as "openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5" or "scripted/demo". */
export type ModelName = `${string}/${string}`;

/** The agent definition. */
export interface DeepAgentConfig {
  /** Letters, digits, "_", "-" and "."; the `model` callers send on the OpenAI/Anthropic wires. */
  name: string;
  /**
   * The model; a list tries the next one when a model answers 429, 5xx or
   * overloaded (after its own retries) before any output was streamed.
   */
  model: ModelName | [ModelName, ...ModelName[]];
  /** What the agent does, for callers that list agents (its tool description at /mcp); default: the first line of `instructions`. */
  description?: string;
  /**
   * The system prompt: a string, or a function evaluated before every model
   * call of a turn (so shared state a tool changed can shape the next step).
   * A function that throws, or returns anything but a string, fails the run
   * (`instructions_failed`).
   */
  instructions?: string | ((ctx: InstructionsContext) => string | Promise<string>);
  /**
   * Settings a client's request may set instead of `modelSettings`
   * (`temperature`, `max_tokens`/`max_completion_tokens`/`max_output_tokens`,
   * `stop`/`stop_sequences`). Default none: client sampling values are ignored.
   */
  clientOverrides?: ClientOverride[];
  /**
   * Tools by name. Names may not clash with the built-ins: write_todos, ls,
   * read_file, write_file, edit_file, task.
   */
  tools?: Record<string, ToolDef<any, any>>;
  subagents?: SubagentDef[];
  /** The only state keys a client may write, each with its schema. */
  editableState?: Record<string, Schema>;
  /**
   * The final answer's schema (a JSON Schema object or a zod schema): the
   * model is asked for JSON matching it, the answer is validated, and a
   * failing answer is sent back to the model once with the error.
   */
  output?: Schema;
  /** Bounds model calls per turn (default 25). */
  maxSteps?: number;
  /**
   * The model's context window in tokens. Default: the known window of common
   * models (gpt-4o, gpt-4o-mini: 128k; gpt-4.1: 1M; claude-sonnet-4,
   * claude-opus-4, claude-3-5, claude-3-7: 200k), else no limit.
   */
  contextWindow?: number;
  /**
   * What happens when a thread outgrows the window: `'trim'` (the default)
   * sends only the most recent turns that fit, keeping tool calls with their
   * results, the system prompt and the latest user message, and leaving room
   * for the answer (`modelSettings.maxTokens`, else 4096). The stored history
   * is kept whole. A latest message that cannot fit fails the turn
   * (`context_length_exceeded`, 400). `'summarize'` (durable threads; a
   * stateless turn trims) first summarises the turns trim would leave out
   * with the agent's own model, stores the summary in the thread, and sends it
   * ahead of the recent turns until they outgrow the window again.
   */
  contextPolicy?: 'trim' | 'summarize';
  /**
   * What a new message does when it meets a turn that is still running on
   * its thread (double-texting), unless the request says otherwise
   * (`x-stackbone-multitask`, AG-UI `forwardedProps.multitask`, Responses
   * `metadata.multitask`): `'reject'` (the default) answers
   * `409 run_in_progress`; `'enqueue'` keeps the new message, durably, and
   * runs it once the running turn (and any message queued before it) has
   * ended, its request streaming from its turn's start; `'interrupt'`
   * cancels the running turn, keeping
   * what it produced, and runs the new message; `'rollback'` cancels it and
   * drops its messages (the new message goes on from before that turn, on a
   * new branch), then runs the new message.
   */
  multitask?: 'reject' | 'enqueue' | 'interrupt' | 'rollback';
  /**
   * What a request does when its durable turn pauses for a human decision.
   * `'pause'` (the default) ends it: the pending call shows as a tool call and
   * the next message gets `409 approval_pending` until someone decides.
   * `'wait'` holds the request open (SSE keepalives on streams) while the
   * decision is made out of band (Studio, `stackbone hitl`, the API) and the
   * same response goes on with the resumed turn, for clients that run their own
   * agent loop; after `STACKBONE_APPROVAL_WAIT` (default 10m) it ends as with
   * `'pause'`. A request's `x-stackbone-approval: wait|pause` header wins.
   */
  approvalMode?: 'pause' | 'wait';
  /**
   * Turns the server runs on its own time: at each firing of `cron` the agent
   * gets `input` as a user message, as a normal durable turn (it can pause for
   * approval, counts toward budgets). Each firing runs once however many
   * replicas share the database; one missed while the server was down runs
   * once on start (`catchUp: 'one'`, the default) or is skipped (`'none'`).
   */
  schedules?: Schedule[];
  /**
   * Built-in memory tools: `remember` (key?, fact), `recall` (query) and
   * `forget` (key), which keep facts across threads in the memory store, under
   * `namespace` (default `['users', '{userId}']`; `{userId}` is the caller's
   * `x-stackbone-user` header, `anonymous` without one). Off by default.
   */
  memory?: boolean | { namespace?: string[] };
  /**
   * Caps every tool result the model gets, in bytes (default 100000, and never
   * more than a quarter of a known context window): a longer result is cut,
   * with a note the model sees saying how much was left out. An MCP server's
   * `maxResultBytes` wins for its tools.
   */
  maxToolResultBytes?: number;
  /** Settings of this agent's model calls. */
  modelSettings?: ModelSettings;
  /** `false` turns off the built-in write_todos tool. */
  todos?: boolean;
  /** `false` turns off the built-in file tools (ls, read_file, write_file, edit_file). */
  files?: boolean;
  /**
   * MCP servers whose tools join the agent's, named `{server}_{tool}`. Server
   * names: letters, digits, "_" and "-".
   */
  mcpServers?: Record<string, MCPServer>;
  /**
   * Remote A2A 1.0 agents the agent can hand work to through the `task`
   * tool (`subagent_type` = the key), like its subagents. `url` is the
   * agent's A2A base (its card is read at `/.well-known/agent-card.json`
   * under it) or the card's own URL; header values may reference the
   * server's environment as `'${VAR}'` and are redacted everywhere.
   * `description`, when set, replaces the summary of the card's skills.
   */
  a2aAgents?: Record<string, A2AAgent>;
  /**
   * Environment variables the agent's tools may read as `ctx.env.NAME`
   * (process environment first, then DIR/.env). Valid names only.
   */
  env?: string[];
}

/**
 * Which of an MCP server's tools wait for a human decision: `'annotations'`
 * (default: all but those marked `readOnlyHint: true` or
 * `destructiveHint: false`), `'always'`, `'never'`, or per tool (the server's
 * tool name) a needsApproval value; unlisted tools follow the annotations.
 */
export type MCPApproval = 'annotations' | 'always' | 'never' | Record<string, NeedsApproval<any>>;

/** A remote A2A agent (see `a2aAgents`). */
export interface A2AAgent {
  url: string;
  headers?: Record<string, string>;
  description?: string;
}

/**
 * An MCP server: streamable HTTP (`url`, `headers`) or a stdio child process
 * (`command`, `args`, `env`). Header and env values may reference the
 * server's environment as `'${VAR}'`; an unset variable fails the load.
 */
export type MCPServer =
  | { url: string; headers?: Record<string, string>; approval?: MCPApproval; maxResultBytes?: number; tools?: MCPTools }
  | { command: string; args?: string[]; env?: Record<string, string>; approval?: MCPApproval; maxResultBytes?: number; tools?: MCPTools };

/**
 * Which of an MCP server's tools the agent gets, by the server's own tool
 * names: `include` (only these), `exclude` (all but these), and `rename`
 * (the agent-side name to use instead of `{server}_{tool}`, to settle a
 * name collision).
 */
export interface MCPTools {
  include?: string[];
  exclude?: string[];
  rename?: Record<string, string>;
}

/**
 * A duration: a number of milliseconds, or a string such as `"90s"`, `"2m"`,
 * `"1m30s"` or `"500ms"` (units ms, s, m, h).
 */
export type Duration = number | string;

/** What a function-valued `instructions` is called with. */
export interface InstructionsContext {
  /** The thread's shared state (a copy: changes are not kept). */
  state: Record<string, any>;
  threadId: string;
  /** The agent's name. */
  agent: string;
}

/** The settings a client may override (`clientOverrides`). */
export type ClientOverride = 'temperature' | 'maxTokens' | 'stop' | 'reasoningEffort';

/**
 * Sampling settings, sent on every model call in each provider's own field
 * names. Unset fields leave the provider's defaults.
 */
export interface SamplingSettings {
  /** 0 to 2. OpenAI-compatible: `temperature`. Not sent to Anthropic (its current API dropped it). */
  temperature?: number;
  /** 0 to 1. OpenAI-compatible: `top_p`. Not sent to Anthropic. */
  topP?: number;
  /** OpenAI: `max_completion_tokens`; Ollama: `max_tokens`; Anthropic: `max_tokens` (default 4096). */
  maxTokens?: number;
  /** OpenAI-compatible: `stop`; Anthropic: `stop_sequences`. */
  stop?: string | string[];
  /** OpenAI-compatible: `seed`. No Anthropic equivalent. */
  seed?: number;
  /**
   * OpenAI-compatible: `reasoning_effort`. Anthropic: extended thinking with
   * `budget_tokens` 1024 (minimal, low), 4096 (medium) or 16384 (high);
   * `max_tokens`, when not set, becomes the budget + 4096, and must exceed it
   * when set.
   */
  reasoningEffort?: 'minimal' | 'low' | 'medium' | 'high';
  /** OpenAI-compatible: `parallel_tool_calls`; Anthropic: `false` sets `tool_choice.disable_parallel_tool_use`. */
  parallelToolCalls?: boolean;
  /**
   * Extra request body fields per provider (`openai`, `anthropic`,
   * `ollama`), merged over what Stackbone sends, e.g.
   * `{ openai: { user: 'u1' }, anthropic: { metadata: { user_id: 'u1' } } }`.
   */
  providerOptions?: Record<string, Record<string, unknown>>;
}

/** Settings of an agent's model calls. */
export interface ModelSettings extends SamplingSettings {
  /**
   * Bounds each attempt of a model call (default: the server's
   * STACKBONE_MODEL_TIMEOUT, 10m). A timed-out attempt is retried like an
   * upstream 5xx, then the turn fails with a 504 `upstream_timeout`.
   */
  timeout?: Duration;
  /**
   * Bounds the wait for the first chunk of a model answer and between two
   * chunks (default: the server's STACKBONE_MODEL_IDLE_TIMEOUT, 2m).
   */
  idleTimeout?: Duration;
}

/** Defines a deep agent; export it as the file's default export. */
export declare function defineDeepAgent(config: DeepAgentConfig): DeepAgentConfig;

/** Defines a tool; `execute`'s arguments are typed from `parameters`. */
export declare function tool<S extends Schema = JSONSchema>(def: ToolDef<S>): ToolDef<S>;

declare const _default: { defineDeepAgent: typeof defineDeepAgent; tool: typeof tool };
export default _default;

/** One of an agent's schedules (`defineDeepAgent({ schedules })`). */
export interface Schedule {
  /** Unique among the agent's schedules. */
  name: string;
  /** Five cron fields (`'0 9 * * 1-5'`) or a descriptor (`'@every 15m'`, `'@daily'`). */
  cron: string;
  /** IANA time zone the cron is read in, such as `'Europe/Paris'` (default UTC). */
  timezone?: string;
  /** The user message each run starts with. */
  input: string;
  /** The thread the runs go on, or `'new'` (the default) for a new thread per run. */
  thread?: string | 'new';
  /** A firing missed while the server was down: run it once on start (`'one'`, the default) or skip it. */
  catchUp?: 'one' | 'none';
  /** The API key label the runs count under (default: the tenant's admin). */
  key?: string;
}
