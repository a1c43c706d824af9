// prelude.js runs once in every goja runtime before the agent bundle. It is a
// single function expression: Go calls it with the host object (Go functions)
// and gets back the internal API Go drives (register, call, approval hooks).
// It also installs the Web globals goja lacks and globalThis.__stackbone, which
// the virtual 'stackbone' module re-exports.
(function (host) {
  'use strict';

  const BUILTIN_TOOLS = ['write_todos', 'ls', 'read_file', 'write_file', 'edit_file', 'task'];
  const FILE_TOOLS = ['ls', 'read_file', 'write_file', 'edit_file'];
  const MEMORY_TOOLS = ['remember', 'recall', 'forget'];
  const DECISIONS = ['approve', 'reject', 'edit'];
  const AGENT_KEYS = ['name', 'model', 'instructions', 'tools', 'subagents', 'editableState', 'maxSteps', 'modelSettings', 'todos', 'files', 'mcpServers', 'description', 'clientOverrides', 'env', 'output', 'contextWindow', 'contextPolicy', 'maxToolResultBytes', 'multitask', 'approvalMode', 'schedules', 'memory', 'a2aAgents'];
  const SCHEDULE_KEYS = ['name', 'cron', 'timezone', 'input', 'thread', 'catchUp', 'key'];
  const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
  const MCP_HTTP_KEYS = ['url', 'headers', 'approval', 'maxResultBytes', 'tools'];
  const MCP_STDIO_KEYS = ['command', 'args', 'env', 'approval', 'maxResultBytes', 'tools'];
  const MCP_MODES = ['annotations', 'always', 'never'];
  const MCP_NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
  const A2A_KEYS = ['url', 'headers', 'description'];
  const SAMPLING_KEYS = ['temperature', 'topP', 'maxTokens', 'stop', 'seed', 'reasoningEffort', 'parallelToolCalls', 'providerOptions'];
  const MODEL_SETTINGS_KEYS = ['timeout', 'idleTimeout', ...SAMPLING_KEYS];
  const REASONING_EFFORTS = ['minimal', 'low', 'medium', 'high'];
  const CLIENT_OVERRIDES = ['temperature', 'maxTokens', 'stop', 'reasoningEffort'];
  const DURATION_UNITS = { ms: 1, s: 1000, m: 60000, h: 3600000 };
  const TOOL_KEYS = ['description', 'parameters', 'jsonSchema', 'needsApproval', 'timeoutMs', 'idempotent', 'execute'];
  const APPROVAL_KEYS = ['when', 'description', 'allowedDecisions', 'expiresAfter', 'approvals'];
  const SUBAGENT_KEYS = ['name', 'description', 'instructions', 'model', 'tools', 'modelSettings'];
  const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
  const TOOL_NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
  const MODEL_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]*\/[^\s]+$/;

  const locs = new WeakMap(); // config object -> call site {file,line,col}
  const defined = new WeakSet(); // objects returned by defineDeepAgent

  const def = (obj, name, value) =>
    Object.defineProperty(obj, name, { value, writable: true, configurable: true, enumerable: false });

  // ---------------------------------------------------------------- errors

  class StackboneConfigError extends Error {
    constructor(message, loc) {
      super(message);
      this.name = 'StackboneConfigError';
      this.loc = loc || null;
    }
  }

  function fail(msg, loc) {
    throw new StackboneConfigError(msg, loc);
  }

  const isObj = (v) => v !== null && typeof v === 'object';
  const isPlain = (v) => isObj(v) && !Array.isArray(v);
  const isFn = (v) => typeof v === 'function';
  const str = (v) => JSON.stringify(v);
  // parseJSON is JSON.parse for the texts Go hands in (arguments, state):
  // decoded natively into the same plain values when the host can, else by
  // JSON.parse (which throws the same errors as always).
  const parseJSON = (text) => {
    const v = host.parseJSON(text);
    return v === undefined ? JSON.parse(text) : v;
  };

  function unknownKeys(obj, allowed, what, loc) {
    for (const k of Object.keys(obj)) {
      if (!allowed.includes(k)) {
        fail(`${what}: unknown field ${str(k)} (allowed: ${allowed.join(', ')})`, loc);
      }
    }
  }

  function isStandard(s) {
    return isObj(s) && isObj(s['~standard']) && isFn(s['~standard'].validate);
  }

  // toJSONSchema turns a plain JSON Schema or a Standard Schema into a JSON
  // Schema object. An explicit JSON Schema wins when given.
  function toJSONSchema(schema, explicit, what, loc) {
    let out;
    if (explicit !== undefined) {
      if (!isPlain(explicit)) fail(`${what}: jsonSchema must be a JSON Schema object`, loc);
      out = explicit;
    } else if (isStandard(schema)) {
      const std = schema['~standard'];
      try {
        if (isObj(std.jsonSchema) && isFn(std.jsonSchema.input)) {
          out = std.jsonSchema.input({ target: 'draft-2020-12' });
        } else if (isFn(schema.toJSONSchema)) {
          out = schema.toJSONSchema();
        }
      } catch (e) {
        fail(`${what}: cannot convert schema to JSON Schema: ${e && e.message ? e.message : e}`, loc);
      }
      if (out === undefined) {
        fail(`${what}: this ${std.vendor || 'Standard'} schema cannot produce JSON Schema; add a jsonSchema field`, loc);
      }
    } else if (isPlain(schema)) {
      out = schema;
    } else {
      fail(`${what}: must be a JSON Schema object or a Standard Schema (such as zod)`, loc);
    }
    out = JSON.parse(JSON.stringify(out));
    if (isPlain(out)) delete out.$schema;
    return out;
  }

  // ---------------------------------------------------------------- validation

  function checkTool(name, t, loc) {
    const what = name ? `tool ${str(name)}` : 'tool()';
    loc = locs.get(t) || loc;
    if (!isPlain(t)) fail(`${what}: must be an object created with tool({...})`, loc);
    unknownKeys(t, TOOL_KEYS, what, loc);
    if (!isFn(t.execute)) fail(`${what}: execute must be a function`, loc);
    if (t.description !== undefined && typeof t.description !== 'string') {
      fail(`${what}: description must be a string`, loc);
    }
    if (t.parameters !== undefined && !isPlain(t.parameters)) {
      fail(`${what}: parameters must be a JSON Schema object or a Standard Schema (such as zod)`, loc);
    }
    if (t.jsonSchema !== undefined && !isPlain(t.jsonSchema)) fail(`${what}: jsonSchema must be an object`, loc);
    if (t.timeoutMs !== undefined && !(typeof t.timeoutMs === 'number' && t.timeoutMs > 0 && isFinite(t.timeoutMs))) {
      fail(`${what}: timeoutMs must be a positive number of milliseconds`, loc);
    }
    if (t.idempotent !== undefined && typeof t.idempotent !== 'boolean') {
      fail(`${what}: idempotent must be true or false`, loc);
    }
    checkApprovalForm(t.needsApproval, what, loc);
  }

  function checkStringMap(m, field, loc) {
    if (!isPlain(m)) fail(`${field} must be an object of strings`, loc);
    for (const [k, v] of Object.entries(m)) {
      if (typeof v !== 'string') fail(`${field}.${k} must be a string (use '\${VAR}' to read the environment)`, loc);
    }
  }

  function checkApprovalForm(na, what, loc) {
    if (na === undefined || typeof na === 'boolean' || isFn(na)) return;
    if (!isPlain(na)) fail(`${what}: needsApproval must be true, false, a function or an object`, loc);
    unknownKeys(na, APPROVAL_KEYS, `${what} needsApproval`, loc);
    if (na.when !== undefined && typeof na.when !== 'boolean' && !isFn(na.when)) {
      fail(`${what}: needsApproval.when must be a boolean or a function (args) => boolean`, loc);
    }
    if (na.description !== undefined && typeof na.description !== 'string' && !isFn(na.description)) {
      fail(`${what}: needsApproval.description must be a string or a function (args) => string`, loc);
    }
    if (na.allowedDecisions !== undefined) {
      if (!Array.isArray(na.allowedDecisions) || na.allowedDecisions.length === 0) {
        fail(`${what}: needsApproval.allowedDecisions must be a non-empty array of ${DECISIONS.join(', ')}`, loc);
      }
      for (const d of na.allowedDecisions) {
        if (!DECISIONS.includes(d)) {
          fail(`${what}: needsApproval.allowedDecisions: unknown decision ${str(d)} (allowed: ${DECISIONS.join(', ')})`, loc);
        }
      }
    }
    if (na.expiresAfter !== undefined) durationMs(na.expiresAfter, `${what}: needsApproval.expiresAfter`, loc);
    if (na.approvals !== undefined && !(Number.isInteger(na.approvals) && na.approvals >= 1)) {
      fail(`${what}: needsApproval.approvals must be an integer of at least 1 (got ${str(na.approvals)})`, loc);
    }
  }

  function checkMCPServers(servers, what, loc) {
    if (!isPlain(servers)) fail(`${what}: mcpServers must be an object mapping server names to { url } or { command }`, loc);
    for (const [name, s] of Object.entries(servers)) {
      const sw = `${what}: mcpServers.${name}`;
      if (!MCP_NAME_RE.test(name)) fail(`${what}: MCP server name ${str(name)} must be 1-64 letters, digits, "_" or "-"`, loc);
      if (!isPlain(s)) fail(`${sw} must be an object: { url, headers? } or { command, args?, env? }`, loc);
      if (s.url !== undefined && s.command !== undefined) fail(`${sw}: give either url (streamable HTTP) or command (stdio), not both`, loc);
      if (s.url !== undefined) {
        unknownKeys(s, MCP_HTTP_KEYS, sw, loc);
        if (typeof s.url !== 'string' || !/^https?:\/\/\S+$/.test(s.url)) fail(`${sw}: url must be an http:// or https:// URL, got ${str(s.url)}`, loc);
        if (s.headers !== undefined) checkStringMap(s.headers, `${sw}.headers`, loc);
      } else if (s.command !== undefined) {
        unknownKeys(s, MCP_STDIO_KEYS, sw, loc);
        if (typeof s.command !== 'string' || s.command === '') fail(`${sw}: command must be a non-empty string`, loc);
        if (s.args !== undefined && !(Array.isArray(s.args) && s.args.every((a) => typeof a === 'string'))) {
          fail(`${sw}: args must be an array of strings`, loc);
        }
        if (s.env !== undefined) checkStringMap(s.env, `${sw}.env`, loc);
      } else {
        fail(`${sw}: needs url (streamable HTTP) or command (stdio)`, loc);
      }
      if (s.tools !== undefined) {
        const tw = `${sw}.tools`;
        if (!isPlain(s.tools)) fail(`${tw} must be an object: { include?, exclude?, rename? }`, loc);
        unknownKeys(s.tools, ['include', 'exclude', 'rename'], tw, loc);
        for (const k of ['include', 'exclude']) {
          const v = s.tools[k];
          if (v !== undefined && !(Array.isArray(v) && v.every((n) => typeof n === 'string'))) fail(`${tw}.${k} must be an array of the server's tool names`, loc);
        }
        if (s.tools.rename !== undefined) {
          checkStringMap(s.tools.rename, `${tw}.rename`, loc);
          for (const [tn, n] of Object.entries(s.tools.rename)) {
            if (!MCP_NAME_RE.test(n)) fail(`${tw}.rename.${tn}: ${str(n)} must be 1-64 letters, digits, "_" or "-"`, loc);
          }
        }
      }
      if (s.maxResultBytes !== undefined && !(Number.isInteger(s.maxResultBytes) && s.maxResultBytes > 0)) {
        fail(`${sw}: maxResultBytes must be a positive integer (bytes)`, loc);
      }
      const ap = s.approval;
      if (ap !== undefined && !MCP_MODES.includes(ap)) {
        if (!isPlain(ap)) fail(`${sw}: approval must be ${MCP_MODES.map(str).join(', ')} or an object mapping tool names to needsApproval`, loc);
        for (const [tn, na] of Object.entries(ap)) checkApprovalForm(na, `${sw}.approval.${tn}`, loc);
      }
    }
  }

  // checkA2AAgents checks a2aAgents: { name: { url, headers?, description? } };
  // a name may not be a local subagent's (both are subagent_type values).
  function checkA2AAgents(agents, subs, what, loc) {
    if (!isPlain(agents)) fail(`${what}: a2aAgents must be an object mapping agent names to { url, headers?, description? }`, loc);
    const local = new Set(['general-purpose']);
    if (Array.isArray(subs)) for (const s of subs) if (isPlain(s) && typeof s.name === 'string') local.add(s.name);
    for (const [name, s] of Object.entries(agents)) {
      const sw = `${what}: a2aAgents.${name}`;
      if (!NAME_RE.test(name)) fail(`${what}: A2A agent name ${str(name)} must be 1-64 letters, digits, "_", "-" or "."`, loc);
      if (local.has(name)) fail(`${sw}: the name clashes with a subagent of the same name (subagents and a2aAgents share the task tool's subagent_type)`, loc);
      if (!isPlain(s)) fail(`${sw} must be an object: { url, headers?, description? }`, loc);
      unknownKeys(s, A2A_KEYS, sw, loc);
      if (typeof s.url !== 'string' || !/^https?:\/\/[^\s/?#]+\S*$/.test(s.url)) fail(`${sw}: url must be an http:// or https:// URL (the agent's A2A base or its agent card), got ${str(s.url)}`, loc);
      if (s.headers !== undefined) checkStringMap(s.headers, `${sw}.headers`, loc);
      if (s.description !== undefined && (typeof s.description !== 'string' || s.description === '')) fail(`${sw}: description must be a non-empty string`, loc);
    }
  }

  // durationMs reads a duration: a number of milliseconds or a string such
  // as "90s", "1m30s" or "500ms". It returns a positive whole number of
  // milliseconds, or fails naming the field.
  function durationMs(v, field, loc) {
    let ms = NaN;
    if (typeof v === 'number') {
      ms = v;
    } else if (typeof v === 'string' && /^(\d+(\.\d+)?(ms|h|m|s))+$/.test(v)) {
      ms = 0;
      for (const [, n, , unit] of v.matchAll(/(\d+(\.\d+)?)(ms|h|m|s)/g)) ms += Number(n) * DURATION_UNITS[unit];
    }
    if (!Number.isFinite(ms) || ms < 1) {
      fail(`${field} must be a positive number of milliseconds or a duration string such as "90s" or "2m", got ${str(v)}`, loc);
    }
    return Math.round(ms);
  }

  function checkModelSettings(ms, what, loc, keys) {
    if (!isPlain(ms)) fail(`${what}: modelSettings must be an object`, loc);
    keys = keys || MODEL_SETTINGS_KEYS;
    unknownKeys(ms, keys, `${what}: modelSettings`, loc);
    for (const k of ['timeout', 'idleTimeout']) {
      if (ms[k] !== undefined) durationMs(ms[k], `${what}: modelSettings.${k}`, loc);
    }
    const f = `${what}: modelSettings`;
    const num = (k, lo, hi) => {
      const v = ms[k];
      if (v !== undefined && !(typeof v === 'number' && v >= lo && v <= hi)) fail(`${f}.${k} must be a number from ${lo} to ${hi}, got ${str(v)}`, loc);
    };
    num('temperature', 0, 2);
    num('topP', 0, 1);
    if (ms.maxTokens !== undefined && !(Number.isInteger(ms.maxTokens) && ms.maxTokens > 0)) {
      fail(`${f}.maxTokens must be a positive integer, got ${str(ms.maxTokens)}`, loc);
    }
    if (ms.stop !== undefined && typeof ms.stop !== 'string' &&
        !(Array.isArray(ms.stop) && ms.stop.length > 0 && ms.stop.every((x) => typeof x === 'string' && x !== ''))) {
      fail(`${f}.stop must be a string or a non-empty array of strings, got ${str(ms.stop)}`, loc);
    }
    if (ms.seed !== undefined && !Number.isSafeInteger(ms.seed)) fail(`${f}.seed must be an integer, got ${str(ms.seed)}`, loc);
    if (ms.reasoningEffort !== undefined && !REASONING_EFFORTS.includes(ms.reasoningEffort)) {
      fail(`${f}.reasoningEffort must be one of ${REASONING_EFFORTS.map(str).join(', ')}, got ${str(ms.reasoningEffort)}`, loc);
    }
    if (ms.parallelToolCalls !== undefined && typeof ms.parallelToolCalls !== 'boolean') {
      fail(`${f}.parallelToolCalls must be a boolean`, loc);
    }
    if (ms.providerOptions !== undefined) {
      if (!isPlain(ms.providerOptions)) fail(`${f}.providerOptions must be an object mapping provider names to objects`, loc);
      for (const [p, o] of Object.entries(ms.providerOptions)) {
        if (!isPlain(o)) fail(`${f}.providerOptions.${p} must be an object of request body fields`, loc);
      }
    }
  }

  // describeSettings is the sampling part of modelSettings as Go reads it
  // (model.Settings), or null when there is none.
  function describeSettings(ms) {
    if (!ms) return null;
    const out = {};
    for (const k of SAMPLING_KEYS) {
      if (ms[k] !== undefined) out[k] = k === 'stop' && typeof ms.stop === 'string' ? [ms.stop] : ms[k];
    }
    return Object.keys(out).length ? JSON.parse(JSON.stringify(out)) : null;
  }

  function checkModel(m, what, loc) {
    if (typeof m !== 'string' || !MODEL_RE.test(m)) {
      fail(`${what}: model must be a "provider/model" string such as "openai/gpt-4o-mini", got ${str(m)}`, loc);
    }
  }

  function checkAgent(cfg, loc) {
    if (!isPlain(cfg)) fail('defineDeepAgent: expected a config object', loc);
    unknownKeys(cfg, AGENT_KEYS, 'defineDeepAgent', loc);
    if (cfg.name === undefined || cfg.name === '') fail('defineDeepAgent: name is required', loc);
    if (typeof cfg.name !== 'string' || !NAME_RE.test(cfg.name)) {
      fail(`defineDeepAgent: name ${str(cfg.name)} must be 1-64 letters, digits, "_", "-" or "."`, loc);
    }
    const what = `agent ${str(cfg.name)}`;
    if (cfg.model === undefined) fail(`${what}: model is required`, loc);
    if (Array.isArray(cfg.model)) {
      if (cfg.model.length === 0) fail(`${what}: model must list at least one "provider/model"`, loc);
      cfg.model.forEach((m, i) => checkModel(m, `${what}: model[${i}]`, loc));
    } else {
      checkModel(cfg.model, what, loc);
    }
    if (cfg.instructions !== undefined && typeof cfg.instructions !== 'string' && !isFn(cfg.instructions)) {
      fail(`${what}: instructions must be a string or a function ({ state, threadId, agent }) => string`, loc);
    }
    if (cfg.clientOverrides !== undefined) {
      if (!Array.isArray(cfg.clientOverrides)) fail(`${what}: clientOverrides must be an array of setting names (${CLIENT_OVERRIDES.join(', ')})`, loc);
      for (const o of cfg.clientOverrides) {
        if (!CLIENT_OVERRIDES.includes(o)) fail(`${what}: clientOverrides: unknown setting ${str(o)} (allowed: ${CLIENT_OVERRIDES.join(', ')})`, loc);
      }
    }
    if (cfg.description !== undefined && typeof cfg.description !== 'string') {
      fail(`${what}: description must be a string`, loc);
    }
    for (const k of ['todos', 'files']) {
      if (cfg[k] !== undefined && typeof cfg[k] !== 'boolean') fail(`${what}: ${k} must be a boolean`, loc);
    }
    if (cfg.maxSteps !== undefined && !(Number.isInteger(cfg.maxSteps) && cfg.maxSteps > 0)) {
      fail(`${what}: maxSteps must be a positive integer`, loc);
    }
    if (cfg.contextWindow !== undefined && !(Number.isInteger(cfg.contextWindow) && cfg.contextWindow > 0)) {
      fail(`${what}: contextWindow must be a positive integer (tokens)`, loc);
    }
    if (cfg.maxToolResultBytes !== undefined && !(Number.isInteger(cfg.maxToolResultBytes) && cfg.maxToolResultBytes > 0)) {
      fail(`${what}: maxToolResultBytes must be a positive integer (bytes)`, loc);
    }
    if (cfg.contextPolicy !== undefined && cfg.contextPolicy !== 'trim' && cfg.contextPolicy !== 'summarize') {
      fail(`${what}: contextPolicy: unknown policy ${str(cfg.contextPolicy)} (allowed: 'trim', 'summarize')`, loc);
    }
    if (cfg.multitask !== undefined && !['reject', 'enqueue', 'interrupt', 'rollback'].includes(cfg.multitask)) {
      fail(`${what}: multitask: unknown strategy ${str(cfg.multitask)} (allowed: 'reject', 'enqueue', 'interrupt', 'rollback')`, loc);
    }
    if (cfg.approvalMode !== undefined && cfg.approvalMode !== 'pause' && cfg.approvalMode !== 'wait') {
      fail(`${what}: approvalMode: unknown mode ${str(cfg.approvalMode)} (allowed: 'pause', 'wait')`, loc);
    }
    if (cfg.modelSettings !== undefined) checkModelSettings(cfg.modelSettings, what, loc);
    if (cfg.schedules !== undefined) checkSchedules(cfg.schedules, what, loc);
    if (cfg.memory !== undefined) checkMemory(cfg.memory, what, loc);
    if (cfg.output !== undefined && !isPlain(cfg.output)) {
      fail(`${what}: output must be a JSON Schema object or a Standard Schema (such as zod)`, loc);
    }
    if (cfg.mcpServers !== undefined) checkMCPServers(cfg.mcpServers, what, loc);
    if (cfg.a2aAgents !== undefined) checkA2AAgents(cfg.a2aAgents, cfg.subagents, what, loc);
    if (cfg.env !== undefined) {
      if (!Array.isArray(cfg.env)) fail(`${what}: env must be an array of environment variable names`, loc);
      for (const n of cfg.env) {
        if (typeof n !== 'string' || !ENV_NAME_RE.test(n)) {
          fail(`${what}: env: ${str(n)} is not an environment variable name (letters, digits and _, not starting with a digit)`, loc);
        }
      }
    }
    const tools = cfg.tools === undefined ? {} : cfg.tools;
    if (!isPlain(tools)) fail(`${what}: tools must be an object mapping tool names to tool({...})`, loc);
    for (const [name, t] of Object.entries(tools)) {
      if (!TOOL_NAME_RE.test(name)) {
        fail(`${what}: tool name ${str(name)} must be 1-64 letters, digits, "_" or "-"`, locs.get(t) || loc);
      }
      if (BUILTIN_TOOLS.includes(name)) {
        fail(`${what}: tool ${str(name)} clashes with a built-in tool (${BUILTIN_TOOLS.join(', ')})`, locs.get(t) || loc);
      }
      if (cfg.memory !== undefined && cfg.memory !== false && MEMORY_TOOLS.includes(name)) {
        fail(`${what}: tool ${str(name)} clashes with a built-in memory tool (${MEMORY_TOOLS.join(', ')}; memory is on)`, locs.get(t) || loc);
      }
      checkTool(name, t, loc);
    }
    if (cfg.editableState !== undefined) {
      if (!isPlain(cfg.editableState)) fail(`${what}: editableState must be an object mapping state keys to schemas`, loc);
      for (const [k, s] of Object.entries(cfg.editableState)) {
        if (!isPlain(s)) fail(`${what}: editableState.${k} must be a JSON Schema or a Standard Schema`, loc);
      }
    }
    if (cfg.subagents !== undefined) {
      if (!Array.isArray(cfg.subagents)) fail(`${what}: subagents must be an array`, loc);
      const usable = Object.keys(tools);
      if (cfg.todos !== false) usable.push('write_todos');
      if (cfg.files !== false) usable.push(...FILE_TOOLS);
      const seen = new Set();
      cfg.subagents.forEach((s, i) => {
        const sw = `${what}: subagents[${i}]`;
        if (!isPlain(s)) fail(`${sw} must be an object`, loc);
        unknownKeys(s, SUBAGENT_KEYS, sw, loc);
        if (typeof s.name !== 'string' || !NAME_RE.test(s.name)) fail(`${sw}: name is required (letters, digits, "_", "-", ".")`, loc);
        if (seen.has(s.name)) fail(`${what}: duplicate subagent name ${str(s.name)}`, loc);
        seen.add(s.name);
        if (typeof s.description !== 'string' || s.description === '') fail(`${sw} (${s.name}): description is required`, loc);
        if (typeof s.instructions !== 'string') fail(`${sw} (${s.name}): instructions is required`, loc);
        if (s.model !== undefined) checkModel(s.model, `${sw} (${s.name})`, loc);
        if (s.modelSettings !== undefined) checkModelSettings(s.modelSettings, `${sw} (${s.name})`, loc, SAMPLING_KEYS);
        if (s.tools !== undefined) {
          if (!Array.isArray(s.tools)) fail(`${sw} (${s.name}): tools must be an array of tool names`, loc);
          for (const tn of s.tools) {
            if (!usable.includes(tn)) {
              fail(`${sw} (${s.name}): unknown tool ${str(tn)} (the agent has: ${usable.join(', ') || 'none'})`, loc);
            }
          }
        }
      });
    }
  }

  // checkMemory checks memory: true | false | { namespace: string[] }; the
  // labels are checked again in Go (no '.', at most 16).
  function checkMemory(m, what, loc) {
    if (typeof m === 'boolean') return;
    const want = `${what}: memory must be true, false or { namespace: ['users', '{userId}'] }`;
    if (!isPlain(m)) fail(want, loc);
    unknownKeys(m, ['namespace'], `${what}: memory`, loc);
    if (m.namespace !== undefined) {
      if (!Array.isArray(m.namespace) || m.namespace.length === 0) fail(`${what}: memory.namespace must be a non-empty array of labels`, loc);
      m.namespace.forEach((l, i) => {
        if (typeof l !== 'string' || l === '' || l.includes('.')) {
          fail(`${what}: memory.namespace[${i}] must be a non-empty string without '.', got ${str(l)}`, loc);
        }
      });
    }
  }

  // checkSchedules checks schedules: [{ name, cron, timezone, input, thread,
  // catchUp, key }]; the cron expression and the zone are parsed in Go.
  function checkSchedules(list, what, loc) {
    if (!Array.isArray(list)) fail(`${what}: schedules must be an array of { name, cron, input, ... }`, loc);
    const seen = new Set();
    list.forEach((sc, i) => {
      const sw = `${what}: schedules[${i}]`;
      if (!isPlain(sc)) fail(`${sw} must be an object { name, cron, input, timezone?, thread?, catchUp?, key? }`, loc);
      unknownKeys(sc, SCHEDULE_KEYS, sw, loc);
      if (typeof sc.name !== 'string' || !NAME_RE.test(sc.name)) fail(`${sw}: name is required (letters, digits, "_", "-", ".")`, loc);
      if (seen.has(sc.name)) fail(`${what}: duplicate schedule name ${str(sc.name)}`, loc);
      seen.add(sc.name);
      const sn = `${sw} (${sc.name})`;
      if (typeof sc.cron !== 'string' || sc.cron.trim() === '') fail(`${sn}: cron is required: five fields such as '0 9 * * 1-5', or '@every 15m'`, loc);
      if (typeof sc.input !== 'string' || sc.input === '') fail(`${sn}: input is required: the user message each run starts with`, loc);
      for (const k of ['timezone', 'thread', 'key']) {
        if (sc[k] !== undefined && typeof sc[k] !== 'string') fail(`${sn}: ${k} must be a string`, loc);
      }
      if (sc.thread === '') fail(`${sn}: thread must be a thread name, or 'new' for a new thread per run`, loc);
      if (sc.catchUp !== undefined && sc.catchUp !== 'one' && sc.catchUp !== 'none') {
        fail(`${sn}: catchUp: unknown policy ${str(sc.catchUp)} (allowed: 'one', 'none')`, loc);
      }
    });
  }

  // ---------------------------------------------------------------- public helpers (module 'stackbone')

  function defineDeepAgent(config) {
    const loc = host.callsite();
    checkAgent(config, loc);
    if (!locs.has(config)) locs.set(config, loc);
    defined.add(config);
    return config;
  }

  function tool(d) {
    const loc = host.callsite();
    checkTool('', d, loc);
    if (!locs.has(d)) locs.set(d, loc);
    return d;
  }

  Object.defineProperty(globalThis, '__stackbone', {
    value: Object.freeze({ defineDeepAgent, tool }),
    enumerable: false,
  });

  // ---------------------------------------------------------------- register / describe

  let AGENT = null;
  const TOOLS = Object.create(null); // name -> {def, std, when, desc}

  // mcpKey names an MCP tool's approval hooks in TOOLS; ':' is in no tool name.
  const mcpKey = (server, name) => `mcp:${server}:${name}`;

  // describeApproval turns a needsApproval value into the JSON Go reads
  // (null: no approval), keeping its functions in entry.
  function describeApproval(na, entry) {
    let approval = null;
    if (na === true) {
      approval = { when: false, allowedDecisions: [] };
    } else if (isFn(na)) {
      entry.when = na;
      approval = { when: true, allowedDecisions: [] };
    } else if (isPlain(na) && na.when !== false) {
      approval = { when: false, allowedDecisions: na.allowedDecisions || [] };
      if (isFn(na.when)) {
        entry.when = na.when;
        approval.when = true;
      }
      if (typeof na.description === 'string') approval.description = na.description;
      if (isFn(na.description)) {
        entry.desc = na.description;
        approval.descriptionFn = true;
      }
      if (na.expiresAfter !== undefined) approval.expiresAfterMs = durationMs(na.expiresAfter, 'needsApproval.expiresAfter', null);
      if (na.approvals !== undefined) approval.approvals = na.approvals;
    }
    return approval;
  }

  function register(mod) {
    const cfg = isObj(mod) ? mod.default : undefined;
    if (cfg === undefined || cfg === null) {
      fail('no default export: write `export default defineDeepAgent({ ... })`', null);
    }
    const loc = locs.get(cfg) || null;
    if (!defined.has(cfg)) checkAgent(cfg, loc);
    AGENT = cfg;
    const what = `agent ${str(cfg.name)}`;
    const out = {
      name: cfg.name,
      model: Array.isArray(cfg.model) ? cfg.model[0] : cfg.model,
      modelFallbacks: Array.isArray(cfg.model) ? cfg.model.slice(1) : [],
      instructions: typeof cfg.instructions === 'string' ? cfg.instructions : '',
      instructionsFn: isFn(cfg.instructions),
      modelSettings: describeSettings(cfg.modelSettings),
      clientOverrides: (cfg.clientOverrides || []).slice(),
      description: cfg.description || '',
      maxSteps: cfg.maxSteps || 0,
      contextWindow: cfg.contextWindow || 0,
      contextPolicy: cfg.contextPolicy || '',
      multitask: cfg.multitask || '',
      approvalMode: cfg.approvalMode || '',
      maxToolResultBytes: cfg.maxToolResultBytes || 0,
      modelTimeoutMs: 0,
      modelIdleTimeoutMs: 0,
      noTodos: cfg.todos === false,
      noFiles: cfg.files === false,
      editableState: {},
      tools: [],
      subagents: [],
      mcpServers: [],
      a2aAgents: Object.entries(cfg.a2aAgents || {}).map(([name, s]) => ({
        name, url: s.url, headers: s.headers || {}, description: s.description || '',
      })),
      schedules: (cfg.schedules || []).map((sc) => ({
        name: sc.name, cron: sc.cron, timezone: sc.timezone || '', input: sc.input,
        thread: sc.thread || 'new', catchUp: sc.catchUp || 'one', key: sc.key || '',
      })),
      env: (cfg.env || []).slice(),
      memory: cfg.memory === undefined || cfg.memory === false ? null
        : { namespace: isPlain(cfg.memory) && cfg.memory.namespace ? cfg.memory.namespace.slice() : null },
      loc,
    };
    const ms = cfg.modelSettings || {};
    if (ms.timeout !== undefined) out.modelTimeoutMs = durationMs(ms.timeout, `${what}: modelSettings.timeout`, loc);
    if (ms.idleTimeout !== undefined) out.modelIdleTimeoutMs = durationMs(ms.idleTimeout, `${what}: modelSettings.idleTimeout`, loc);
    if (cfg.output !== undefined) {
      out.output = toJSONSchema(cfg.output, undefined, `${what}: output`, loc);
      if (!isPlain(out.output)) fail(`${what}: output must describe a JSON object (JSON Schema "type": "object")`, loc);
      if (out.output.type === undefined) out.output.type = 'object';
      if (out.output.type !== 'object') fail(`${what}: output must describe a JSON object (JSON Schema "type": "object")`, loc);
    }
    for (const [k, s] of Object.entries(cfg.editableState || {})) {
      out.editableState[k] = toJSONSchema(s, undefined, `${what}: editableState.${k}`, loc);
    }
    for (const [name, t] of Object.entries(cfg.tools || {})) {
      const tloc = locs.get(t) || loc;
      const tw = `tool ${str(name)}`;
      let params;
      if (t.parameters === undefined && t.jsonSchema === undefined) {
        params = { type: 'object', properties: {} };
      } else {
        params = toJSONSchema(t.parameters, t.jsonSchema, `${tw}: parameters`, tloc);
      }
      if (!isPlain(params) || (params.type !== undefined && params.type !== 'object')) {
        fail(`${tw}: parameters must describe an object (JSON Schema "type": "object")`, tloc);
      }
      if (params.type === undefined) params.type = 'object';
      const entry = { def: t, std: isStandard(t.parameters) ? t.parameters['~standard'] : null, when: null, desc: null };
      const approval = describeApproval(t.needsApproval, entry);
      TOOLS[name] = entry;
      out.tools.push({
        name,
        description: t.description || '',
        parameters: params,
        approval,
        timeoutMs: t.timeoutMs || 0,
        idempotent: t.idempotent === true,
        loc: tloc,
      });
    }
    for (const [name, s] of Object.entries(cfg.mcpServers || {})) {
      const entry = { name, url: s.url || '', headers: s.headers || {}, command: s.command || '', args: s.args || [], env: s.env || {},
        maxResultBytes: s.maxResultBytes || 0,
        tools: { include: s.tools && s.tools.include ? s.tools.include.slice() : null, exclude: (s.tools && s.tools.exclude) || [],
          rename: (s.tools && s.tools.rename) || {} },
        approval: { mode: 'annotations', tools: null } };
      const ap = s.approval;
      if (typeof ap === 'string') entry.approval.mode = ap;
      else if (isPlain(ap)) {
        entry.approval.tools = {};
        for (const [tn, na] of Object.entries(ap)) {
          const hooks = { def: null, std: null, when: null, desc: null };
          entry.approval.tools[tn] = describeApproval(na, hooks);
          TOOLS[mcpKey(name, tn)] = hooks;
        }
      }
      out.mcpServers.push(entry);
    }
    for (const s of cfg.subagents || []) {
      out.subagents.push({
        name: s.name,
        description: s.description,
        instructions: s.instructions,
        model: s.model || '',
        tools: s.tools === undefined ? null : s.tools.slice(),
        modelSettings: describeSettings(s.modelSettings),
      });
    }
    return JSON.stringify(out);
  }

  // ---------------------------------------------------------------- calls

  class ToolArgumentsError extends Error {
    constructor(message, issues) {
      super(message);
      this.name = 'ToolArgumentsError';
      this.issues = issues;
    }
  }

  function issuePath(p) {
    if (!Array.isArray(p) || p.length === 0) return '';
    return p.map((k) => (isObj(k) && 'key' in k ? k.key : k)).map(String).join('.');
  }

  // parseArgs decodes a call's arguments and runs the tool's Standard Schema
  // over them. It returns a promise only when the schema validates
  // asynchronously, so most calls take no extra turn of the job queue.
  function parseArgs(entry, argsJSON, strict) {
    const args = argsJSON ? parseJSON(argsJSON) : {};
    if (!entry.std) return args;
    const r = entry.std.validate(args);
    if (r && isFn(r.then)) return Promise.resolve(r).then((res) => validated(res, args, strict));
    return validated(r, args, strict);
  }

  function validated(r, args, strict) {
    if (r.issues) {
      if (!strict) return args;
      const list = r.issues.map((i) => {
        const p = issuePath(i.path);
        return p ? `${p}: ${i.message}` : i.message;
      });
      throw new ToolArgumentsError(`invalid tool arguments: ${list.join('; ')}`, r.issues);
    }
    return r.value;
  }

  function lookup(name) {
    const e = TOOLS[name];
    if (!e) throw new Error(`unknown tool ${str(name)}`);
    return e;
  }

  const signal = Object.freeze({
    get aborted() {
      return host.aborted();
    },
    get reason() {
      return host.aborted() ? new Error('The operation was aborted') : undefined;
    },
    throwIfAborted() {
      if (host.aborted()) {
        const e = new Error('The operation was aborted');
        e.name = 'AbortError';
        throw e;
      }
    },
    addEventListener() {},
    removeEventListener() {},
    onabort: null,
  });

  const UNTOUCHED = Symbol('untouched state');

  // ctx.store: the tenant's long-term memory store. Each operation runs in
  // Go (host.store) and settles with its JSON result.
  function storeOp(op, args) {
    return host.store(op, JSON.stringify(args)).then((raw) => (raw === '' ? undefined : parseJSON(raw)));
  }
  const memoryStore = Object.freeze({
    put(namespace, key, value, options) {
      return storeOp('put', { namespace, key, value, options: options || {} }).then(() => undefined);
    },
    get(namespace, key, options) {
      return storeOp('get', { namespace, key, options: options || {} });
    },
    delete(namespace, key) {
      return storeOp('delete', { namespace, key }).then(() => undefined);
    },
    search(namespacePrefix, options) {
      return storeOp('search', { namespace: namespacePrefix, options: options || {} });
    },
    listNamespaces(prefix, options) {
      return storeOp('listNamespaces', { namespace: prefix || [], options: options || {} });
    },
  });

  // envFor returns ctx.env for the host's env object: only the names the
  // agent lists, frozen; a null prototype keeps 'toString' and the like
  // undefined too. The host passes the same object on every call of a
  // runtime, so it is copied once.
  let envSrc = null;
  let envObj = null;
  function envFor(src) {
    if (src !== envSrc) {
      envObj = Object.freeze(Object.assign(Object.create(null), src));
      envSrc = src;
    }
    return envObj;
  }

  // A tool call is two host calls: call runs execute and returns what it
  // returned (a promise when it is async, which the host awaits), then
  // finishCall turns the settled value into {content, state}. Calls on a
  // runtime never overlap; current is the one in progress.
  let current = null;

  function call(name, argsJSON, stateJSON, threadId, toolCallId, idempotencyKey, agent, env, user) {
    const entry = lookup(name);
    const args = parseArgs(entry, argsJSON, true);
    // ctx.state is decoded when first used: many tools never touch it, and a
    // state nobody touched is unchanged.
    const rec = { stateJSON, state: undefined, used: false, probing: false, ctx: null };
    const ctx = {
      fetch: fetch,
      get state() {
        if (rec.probing) return UNTOUCHED;
        if (!rec.used) {
          rec.used = true;
          const state = stateJSON ? parseJSON(stateJSON) : {};
          rec.state = isPlain(state) ? state : {};
        }
        return rec.state;
      },
      set state(v) {
        rec.used = true;
        rec.state = v;
      },
      threadId,
      toolCallId,
      idempotencyKey,
      agent,
      // The end user whose turn calls the tool ("id\0label" from the
      // host), null for a turn an API key started.
      user: userOf(user),
      env: envFor(env),
      signal,
      store: memoryStore,
    };
    rec.ctx = ctx;
    current = rec;
    if (args && isFn(args.then)) return args.then((a) => entry.def.execute(a, ctx));
    const out = entry.def.execute(args, ctx);
    // Any thenable is awaited, as await would.
    return out && isFn(out.then) ? Promise.resolve(out) : out;
  }

  function userOf(s) {
    if (typeof s !== 'string') return null;
    const i = s.indexOf('\0');
    return Object.freeze({ id: s.slice(0, i), label: s.slice(i + 1) });
  }

  function finishCall(out) {
    const rec = current;
    current = null;
    let content;
    if (typeof out === 'string') content = out;
    else if (out === undefined) content = '';
    else content = JSON.stringify(out);
    if (content === undefined) content = '';
    const ctx = rec.ctx;
    if (!rec.used) {
      // Unless the tool replaced or deleted the property itself.
      rec.probing = true;
      let untouched;
      try {
        untouched = ctx.state === UNTOUCHED;
      } finally {
        rec.probing = false;
      }
      if (untouched) return { content, state: null };
    }
    if (!isPlain(ctx.state)) throw new TypeError('ctx.state must stay a plain object');
    const after = JSON.stringify(ctx.state);
    return { content, state: stateChanged(after, rec.stateJSON) ? after : null };
  }

  // stateChanged reports whether after, JSON.stringify of ctx.state when a
  // call ends, differs from JSON.stringify of the state the call started
  // with (stateJSON decoded). Stored states are mostly JSON.stringify's own
  // output, so comparing the texts usually settles it without encoding the
  // starting state again.
  function stateChanged(after, stateJSON) {
    if (after === stateJSON) return false;
    let before = stateJSON ? parseJSON(stateJSON) : {};
    if (!isPlain(before)) before = {};
    return after !== JSON.stringify(before);
  }

  async function approvalWhen(name, argsJSON) {
    const entry = lookup(name);
    if (!entry.when) return true;
    let v = entry.when(await parseArgs(entry, argsJSON, false));
    if (v && isFn(v.then)) v = await v;
    return !!v;
  }

  async function approvalDescription(name, argsJSON) {
    const entry = lookup(name);
    if (!entry.desc) return '';
    let v = entry.desc(await parseArgs(entry, argsJSON, false));
    if (v && isFn(v.then)) v = await v;
    return v === undefined || v === null ? '' : String(v);
  }

  // instructions evaluates a function-valued instructions on the thread's
  // state (a copy: changes are not kept).
  async function instructions(stateJSON, meta) {
    const fn = AGENT && AGENT.instructions;
    if (!isFn(fn)) throw new TypeError('the agent has no instructions function');
    let state = stateJSON ? parseJSON(stateJSON) : {};
    if (!isPlain(state)) state = {};
    let v = fn({ state, threadId: meta.threadId, agent: meta.agent });
    if (v && isFn(v.then)) v = await v;
    if (typeof v !== 'string') throw new TypeError(`instructions must return a string, got ${v === null ? 'null' : typeof v}`);
    return v;
  }

  // ---------------------------------------------------------------- console

  function inspect(v, depth, seen) {
    if (typeof v === 'string') return depth === 0 ? v : JSON.stringify(v);
    if (typeof v === 'bigint') return `${v}n`;
    if (typeof v === 'symbol') return v.toString();
    if (typeof v === 'function') return `[Function: ${v.name || 'anonymous'}]`;
    if (!isObj(v)) return String(v);
    if (v instanceof Error) return v.stack || `${v.name}: ${v.message}`;
    if (v instanceof Date) return isNaN(v) ? 'Invalid Date' : v.toISOString();
    if (v instanceof RegExp) return String(v);
    seen = seen || [];
    if (seen.includes(v)) return '[Circular]';
    if (depth > 3) return Array.isArray(v) ? '[Array]' : '[Object]';
    seen = seen.concat([v]);
    if (Array.isArray(v)) return `[ ${v.map((x) => inspect(x, depth + 1, seen)).join(', ')} ]`;
    if (v instanceof Map) {
      return `Map(${v.size}) { ${Array.from(v, ([k, x]) => `${inspect(k, depth + 1, seen)} => ${inspect(x, depth + 1, seen)}`).join(', ')} }`;
    }
    if (v instanceof Set) return `Set(${v.size}) { ${Array.from(v, (x) => inspect(x, depth + 1, seen)).join(', ')} }`;
    if (ArrayBuffer.isView(v)) return `${v.constructor.name}(${v.length}) [ ${Array.from(v).join(', ')} ]`;
    const keys = Object.keys(v);
    if (keys.length === 0) return '{}';
    const ident = /^[A-Za-z_$][\w$]*$/;
    return `{ ${keys.map((k) => `${ident.test(k) ? k : JSON.stringify(k)}: ${inspect(v[k], depth + 1, seen)}`).join(', ')} }`;
  }

  function format(args) {
    if (args.length === 0) return '';
    let rest = args;
    let out = '';
    if (typeof args[0] === 'string' && args[0].includes('%')) {
      let i = 1;
      out = args[0].replace(/%[sdifjoOc%]/g, (m) => {
        if (m === '%%') return '%';
        if (i >= args.length) return m;
        const a = args[i++];
        switch (m) {
          case '%s': return typeof a === 'string' ? a : inspect(a, 1);
          case '%d': case '%i': return typeof a === 'bigint' ? `${a}n` : String(m === '%i' ? parseInt(a) : Number(a));
          case '%f': return String(parseFloat(a));
          case '%j': try { return JSON.stringify(a); } catch (e) { return '[Circular]'; }
          case '%c': return '';
          default: return inspect(a, 1);
        }
      });
      rest = args.slice(i);
    } else {
      out = inspect(args[0], 0);
      rest = args.slice(1);
    }
    for (const a of rest) out += ' ' + inspect(a, 0);
    return out;
  }

  const counts = new Map();
  const timeLabels = new Map();
  const logAt = (level) => (...args) => host.log(level, format(args));
  const console = {
    log: logAt('info'),
    info: logAt('info'),
    debug: logAt('debug'),
    trace: (...args) => host.log('debug', format(args) + '\n' + (new Error().stack || '').split('\n').slice(1).join('\n')),
    warn: logAt('warn'),
    error: logAt('error'),
    dir: (v) => host.log('info', inspect(v, 1)),
    table: (v) => host.log('info', inspect(v, 1)),
    assert: (cond, ...args) => {
      if (!cond) host.log('error', 'Assertion failed' + (args.length ? ': ' + format(args) : ''));
    },
    count: (label = 'default') => {
      const n = (counts.get(label) || 0) + 1;
      counts.set(label, n);
      host.log('info', `${label}: ${n}`);
    },
    countReset: (label = 'default') => counts.delete(label),
    time: (label = 'default') => timeLabels.set(label, Date.now()),
    timeLog: (label = 'default', ...args) => {
      const t = timeLabels.get(label);
      if (t !== undefined) host.log('info', `${label}: ${Date.now() - t}ms` + (args.length ? ' ' + format(args) : ''));
    },
    timeEnd: (label = 'default') => {
      const t = timeLabels.get(label);
      if (t !== undefined) host.log('info', `${label}: ${Date.now() - t}ms`);
      timeLabels.delete(label);
    },
    group: logAt('info'),
    groupCollapsed: logAt('info'),
    groupEnd: () => {},
  };

  // ---------------------------------------------------------------- timers and microtasks

  function setTimeout(fn, ms, ...args) {
    if (!isFn(fn)) throw new TypeError('setTimeout: callback must be a function');
    return host.setTimer(fn, Number(ms) || 0, args, false);
  }
  function setInterval(fn, ms, ...args) {
    if (!isFn(fn)) throw new TypeError('setInterval: callback must be a function');
    return host.setTimer(fn, Number(ms) || 0, args, true);
  }
  function clearTimer(id) {
    if (typeof id === 'number') host.clearTimer(id);
  }
  function queueMicrotask(fn) {
    if (!isFn(fn)) throw new TypeError('queueMicrotask: callback must be a function');
    Promise.resolve().then(() => {
      try {
        fn();
      } catch (e) {
        console.error('Uncaught error in queueMicrotask callback:', e);
      }
    });
  }

  // ---------------------------------------------------------------- encoding

  function viewBytes(input, what) {
    if (input === undefined) return { buf: new ArrayBuffer(0), off: 0, len: 0 };
    if (input instanceof ArrayBuffer) return { buf: input, off: 0, len: input.byteLength };
    if (ArrayBuffer.isView(input)) return { buf: input.buffer, off: input.byteOffset, len: input.byteLength };
    throw new TypeError(`${what}: expected an ArrayBuffer or a typed array`);
  }

  class TextEncoder {
    get encoding() {
      return 'utf-8';
    }
    encode(s = '') {
      return new Uint8Array(host.utf8Encode(String(s)));
    }
    encodeInto(s, dest) {
      const bytes = this.encode(s);
      // Only whole characters are written: back off to a UTF-8 boundary.
      let n = Math.min(bytes.length, dest.length);
      while (n > 0 && n < bytes.length && (bytes[n] & 0xc0) === 0x80) n--;
      dest.set(bytes.subarray(0, n));
      const read = new TextDecoder().decode(bytes.subarray(0, n)).length;
      return { read, written: n };
    }
  }

  class TextDecoder {
    #fatal;
    #ignoreBOM;
    constructor(label = 'utf-8', options = {}) {
      const l = String(label).trim().toLowerCase();
      if (l !== 'utf-8' && l !== 'utf8' && l !== 'unicode-1-1-utf-8') {
        throw new RangeError(`TextDecoder: only utf-8 is supported, got ${str(label)}`);
      }
      this.#fatal = !!(options && options.fatal);
      this.#ignoreBOM = !!(options && options.ignoreBOM);
    }
    get encoding() {
      return 'utf-8';
    }
    get fatal() {
      return this.#fatal;
    }
    get ignoreBOM() {
      return this.#ignoreBOM;
    }
    decode(input) {
      const v = viewBytes(input, 'TextDecoder.decode');
      return host.utf8Decode(v.buf, v.off, v.len, this.#fatal, this.#ignoreBOM);
    }
  }

  const atob = (s) => host.atob(String(s));
  const btoa = (s) => host.btoa(String(s));

  // ---------------------------------------------------------------- crypto

  const crypto = Object.freeze({
    randomUUID: () => host.randomUUID(),
    getRandomValues(arr) {
      if (!ArrayBuffer.isView(arr) || arr instanceof Float32Array || arr instanceof Float64Array || arr instanceof DataView) {
        throw new TypeError('crypto.getRandomValues: expected an integer typed array');
      }
      if (arr.byteLength > 65536) throw new RangeError('crypto.getRandomValues: at most 65536 bytes');
      host.randomFill(arr.buffer, arr.byteOffset, arr.byteLength);
      return arr;
    },
  });

  // ---------------------------------------------------------------- structuredClone

  function structuredClone(value) {
    const seen = new Map();
    const clone = (v) => {
      if (typeof v === 'function' || typeof v === 'symbol') {
        const e = new Error(`${String(v)} could not be cloned`);
        e.name = 'DataCloneError';
        throw e;
      }
      if (!isObj(v)) return v;
      if (seen.has(v)) return seen.get(v);
      let out;
      if (Array.isArray(v)) {
        out = new Array(v.length);
        seen.set(v, out);
        for (let i = 0; i < v.length; i++) if (i in v) out[i] = clone(v[i]);
        return out;
      }
      if (v instanceof Date) out = new Date(v.getTime());
      else if (v instanceof RegExp) out = new RegExp(v.source, v.flags);
      else if (v instanceof ArrayBuffer) out = v.slice(0);
      else if (v instanceof DataView) out = new DataView(v.buffer.slice(0), v.byteOffset, v.byteLength);
      else if (ArrayBuffer.isView(v)) out = new v.constructor(v);
      else if (v instanceof Map) {
        out = new Map();
        seen.set(v, out);
        for (const [k, x] of v) out.set(clone(k), clone(x));
        return out;
      } else if (v instanceof Set) {
        out = new Set();
        seen.set(v, out);
        for (const x of v) out.add(clone(x));
        return out;
      } else if (v instanceof Error) {
        out = new v.constructor(v.message);
        if (v.stack) out.stack = v.stack;
        if ('cause' in v) out.cause = clone(v.cause);
      } else if (v instanceof Boolean || v instanceof Number || v instanceof String) {
        out = Object(v.valueOf());
      } else if (v instanceof Promise || v instanceof WeakMap || v instanceof WeakSet) {
        const e = new Error(`${Object.prototype.toString.call(v)} could not be cloned`);
        e.name = 'DataCloneError';
        throw e;
      } else {
        out = {};
        seen.set(v, out);
        for (const k of Object.keys(v)) out[k] = clone(v[k]);
        return out;
      }
      seen.set(v, out);
      return out;
    };
    return clone(value);
  }

  // ---------------------------------------------------------------- URL

  function formEncode(s) {
    return encodeURIComponent(s)
      .replace(/%20/g, '+')
      .replace(/[!'()~]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
  }
  function formDecode(s) {
    s = s.replace(/\+/g, ' ');
    try {
      return decodeURIComponent(s);
    } catch (e) {
      return s.replace(/%([0-9a-fA-F]{2})/g, (m, h) => String.fromCharCode(parseInt(h, 16)));
    }
  }

  class URLSearchParams {
    #list = [];
    #url = null;
    constructor(init) {
      if (init === undefined || init === null) return;
      if (init instanceof URLSearchParams) {
        this.#list = init.#list.map((p) => p.slice());
      } else if (typeof init === 'object' && isFn(init[Symbol.iterator])) {
        for (const pair of init) {
          const p = Array.from(pair);
          if (p.length !== 2) throw new TypeError('URLSearchParams: each pair must have exactly two items');
          this.#list.push([String(p[0]), String(p[1])]);
        }
      } else if (typeof init === 'object') {
        for (const k of Object.keys(init)) this.#list.push([k, String(init[k])]);
      } else {
        this.#parse(String(init));
      }
    }
    #parse(s) {
      this.#list = [];
      if (s.startsWith('?')) s = s.slice(1);
      for (const part of s.split('&')) {
        if (part === '') continue;
        const i = part.indexOf('=');
        const k = i < 0 ? part : part.slice(0, i);
        const v = i < 0 ? '' : part.slice(i + 1);
        this.#list.push([formDecode(k), formDecode(v)]);
      }
    }
    static _attach(sp, url, search) {
      sp.#url = url;
      sp.#parse(search);
    }
    static _reparse(sp, search) {
      sp.#parse(search);
    }
    #update() {
      if (this.#url) this.#url._setSearchFromParams(this.toString());
    }
    get size() {
      return this.#list.length;
    }
    append(k, v) {
      this.#list.push([String(k), String(v)]);
      this.#update();
    }
    delete(k, v) {
      k = String(k);
      this.#list = this.#list.filter((p) => !(p[0] === k && (v === undefined || p[1] === String(v))));
      this.#update();
    }
    get(k) {
      const p = this.#list.find((p) => p[0] === String(k));
      return p ? p[1] : null;
    }
    getAll(k) {
      return this.#list.filter((p) => p[0] === String(k)).map((p) => p[1]);
    }
    has(k, v) {
      k = String(k);
      return this.#list.some((p) => p[0] === k && (v === undefined || p[1] === String(v)));
    }
    set(k, v) {
      k = String(k);
      v = String(v);
      const i = this.#list.findIndex((p) => p[0] === k);
      if (i < 0) this.#list.push([k, v]);
      else {
        this.#list[i][1] = v;
        this.#list = this.#list.filter((p, j) => j <= i || p[0] !== k);
      }
      this.#update();
    }
    sort() {
      this.#list = this.#list
        .map((p, i) => [p, i])
        .sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1]))
        .map((x) => x[0]);
      this.#update();
    }
    forEach(fn, thisArg) {
      for (const [k, v] of this.#list) fn.call(thisArg, v, k, this);
    }
    keys() {
      return this.#list.map((p) => p[0])[Symbol.iterator]();
    }
    values() {
      return this.#list.map((p) => p[1])[Symbol.iterator]();
    }
    entries() {
      return this.#list.map((p) => p.slice())[Symbol.iterator]();
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    toString() {
      return this.#list.map(([k, v]) => `${formEncode(k)}=${formEncode(v)}`).join('&');
    }
    get [Symbol.toStringTag]() {
      return 'URLSearchParams';
    }
  }

  const DEFAULT_PORTS = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443', 'ftp:': '21' };

  class URL {
    #p;
    #sp;
    constructor(input, base) {
      this.#p = host.parseURL(String(input), base === undefined ? undefined : String(base));
      this.#sp = new URLSearchParams();
      URLSearchParams._attach(this.#sp, this, this.#p.search);
    }
    static canParse(input, base) {
      try {
        new URL(input, base);
        return true;
      } catch (e) {
        return false;
      }
    }
    static parse(input, base) {
      try {
        return new URL(input, base);
      } catch (e) {
        return null;
      }
    }
    _setSearchFromParams(s) {
      this.#p.search = s ? '?' + s : '';
    }
    get href() {
      const p = this.#p;
      let auth = '';
      if (p.username || p.password) auth = p.username + (p.password ? ':' + p.password : '') + '@';
      const slashes = p.hostname !== '' || p.protocol === 'file:' ? '//' : '';
      return p.protocol + slashes + auth + this.host + p.pathname + p.search + p.hash;
    }
    set href(v) {
      this.#p = host.parseURL(String(v), undefined);
      URLSearchParams._reparse(this.#sp, this.#p.search);
    }
    get origin() {
      const p = this.#p;
      return p.protocol in DEFAULT_PORTS && p.protocol !== 'ftp:' ? p.protocol + '//' + this.host : 'null';
    }
    get protocol() {
      return this.#p.protocol;
    }
    set protocol(v) {
      v = String(v).toLowerCase();
      this.#p.protocol = v.endsWith(':') ? v : v + ':';
    }
    get username() {
      return this.#p.username;
    }
    set username(v) {
      this.#p.username = encodeURIComponent(String(v));
    }
    get password() {
      return this.#p.password;
    }
    set password(v) {
      this.#p.password = encodeURIComponent(String(v));
    }
    get host() {
      return this.#p.hostname + (this.#p.port ? ':' + this.#p.port : '');
    }
    set host(v) {
      const u = host.parseURL(this.#p.protocol + '//' + String(v), undefined);
      this.#p.hostname = u.hostname;
      this.#p.port = u.port;
    }
    get hostname() {
      return this.#p.hostname;
    }
    set hostname(v) {
      this.#p.hostname = String(v).toLowerCase();
    }
    get port() {
      return this.#p.port;
    }
    set port(v) {
      v = String(v);
      this.#p.port = v === DEFAULT_PORTS[this.#p.protocol] ? '' : v;
    }
    get pathname() {
      return this.#p.pathname;
    }
    set pathname(v) {
      v = String(v);
      if (!v.startsWith('/')) v = '/' + v;
      this.#p.pathname = encodeURI(v).replace(/%25([0-9a-fA-F]{2})/g, '%$1').replace(/[?#]/g, encodeURIComponent);
    }
    get search() {
      return this.#p.search === '?' ? '' : this.#p.search;
    }
    set search(v) {
      v = String(v);
      if (v.startsWith('?')) v = v.slice(1);
      this.#p.search = v ? '?' + v : '';
      URLSearchParams._reparse(this.#sp, v);
    }
    get searchParams() {
      return this.#sp;
    }
    get hash() {
      return this.#p.hash === '#' ? '' : this.#p.hash;
    }
    set hash(v) {
      v = String(v);
      if (v.startsWith('#')) v = v.slice(1);
      this.#p.hash = v ? '#' + v : '';
    }
    toString() {
      return this.href;
    }
    toJSON() {
      return this.href;
    }
    get [Symbol.toStringTag]() {
      return 'URL';
    }
  }

  // ---------------------------------------------------------------- fetch

  class Headers {
    #map = new Map(); // lower-case name -> [name, value]
    constructor(init) {
      if (init === undefined || init === null) return;
      if (init instanceof Headers) {
        init.forEach((v, k) => this.append(k, v));
      } else if (isFn(init[Symbol.iterator])) {
        for (const pair of init) {
          const p = Array.from(pair);
          if (p.length !== 2) throw new TypeError('Headers: each pair must have exactly two items');
          this.append(p[0], p[1]);
        }
      } else if (isObj(init)) {
        for (const k of Object.keys(init)) this.append(k, init[k]);
      } else {
        throw new TypeError('Headers: expected an object, an array of pairs or Headers');
      }
    }
    append(k, v) {
      const key = String(k).toLowerCase();
      const cur = this.#map.get(key);
      this.#map.set(key, cur === undefined ? String(v) : cur + ', ' + String(v));
    }
    set(k, v) {
      this.#map.set(String(k).toLowerCase(), String(v));
    }
    get(k) {
      const v = this.#map.get(String(k).toLowerCase());
      return v === undefined ? null : v;
    }
    has(k) {
      return this.#map.has(String(k).toLowerCase());
    }
    delete(k) {
      this.#map.delete(String(k).toLowerCase());
    }
    forEach(fn, thisArg) {
      for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this);
    }
    keys() {
      return Array.from(this.#map.keys()).sort()[Symbol.iterator]();
    }
    values() {
      return Array.from(this.keys(), (k) => this.#map.get(k))[Symbol.iterator]();
    }
    entries() {
      return Array.from(this.keys(), (k) => [k, this.#map.get(k)])[Symbol.iterator]();
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    toJSON() {
      return Object.fromEntries(this.entries());
    }
  }

  class Response {
    #body;
    #used = false;
    constructor(raw) {
      this.status = raw.status;
      this.statusText = raw.statusText;
      this.ok = raw.status >= 200 && raw.status < 300;
      this.url = raw.url;
      this.redirected = !!raw.redirected;
      this.headers = new Headers(raw.headers);
      this.#body = raw.body;
    }
    get bodyUsed() {
      return this.#used;
    }
    #take() {
      if (this.#used) return Promise.reject(new TypeError('Response body already read'));
      this.#used = true;
      return Promise.resolve(this.#body);
    }
    arrayBuffer() {
      return this.#take();
    }
    async bytes() {
      return new Uint8Array(await this.#take());
    }
    async text() {
      return host.utf8Decode(await this.#take(), 0, -1, false, false);
    }
    async json() {
      return JSON.parse(await this.text());
    }
    clone() {
      if (this.#used) throw new TypeError('Response body already read');
      return new Response({
        status: this.status,
        statusText: this.statusText,
        url: this.url,
        redirected: this.redirected,
        headers: Array.from(this.headers),
        body: this.#body.slice(0),
      });
    }
  }

  function fetch(input, init) {
    try {
      init = init || {};
      let url;
      if (typeof input === 'string') url = input;
      else if (input instanceof URL) url = input.href;
      else if (isObj(input) && typeof input.url === 'string') url = input.url;
      else url = String(input);
      const method = String(init.method || 'GET').toUpperCase();
      const headers = new Headers(init.headers);
      let body = init.body;
      if (body === undefined || body === null) {
        body = undefined;
      } else if (typeof body === 'string') {
        if (!headers.has('content-type')) headers.set('content-type', 'text/plain;charset=UTF-8');
      } else if (body instanceof URLSearchParams) {
        if (!headers.has('content-type')) headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
        body = body.toString();
      } else if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
        const v = viewBytes(body, 'fetch body');
        body = v.buf.slice(v.off, v.off + v.len);
      } else if (isPlain(body)) {
        // Not in the Fetch standard: a plain object is sent as JSON.
        if (!headers.has('content-type')) headers.set('content-type', 'application/json');
        body = JSON.stringify(body);
      } else {
        body = String(body);
      }
      if (body !== undefined && (method === 'GET' || method === 'HEAD')) {
        throw new TypeError(`fetch: a ${method} request cannot have a body`);
      }
      return host.fetch(url, method, Array.from(headers), body).then((raw) => new Response(raw));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  // ---------------------------------------------------------------- small ES gaps

  if (!Promise.withResolvers) {
    Promise.withResolvers = function () {
      let resolve, reject;
      const promise = new this((a, b) => {
        resolve = a;
        reject = b;
      });
      return { promise, resolve, reject };
    };
  }
  if (!Object.groupBy) {
    Object.groupBy = function (items, fn) {
      const out = Object.create(null);
      let i = 0;
      for (const x of items) {
        const k = fn(x, i++);
        (out[k] || (out[k] = [])).push(x);
      }
      return out;
    };
  }
  if (!Map.groupBy) {
    Map.groupBy = function (items, fn) {
      const out = new Map();
      let i = 0;
      for (const x of items) {
        const k = fn(x, i++);
        if (!out.has(k)) out.set(k, []);
        out.get(k).push(x);
      }
      return out;
    };
  }

  const globals = {
    console,
    setTimeout,
    setInterval,
    clearTimeout: clearTimer,
    clearInterval: clearTimer,
    queueMicrotask,
    TextEncoder,
    TextDecoder,
    atob,
    btoa,
    crypto,
    structuredClone,
    URL,
    URLSearchParams,
    Headers,
    Response,
    fetch,
  };
  for (const [k, v] of Object.entries(globals)) {
    Object.defineProperty(globalThis, k, { value: v, writable: true, configurable: true, enumerable: false });
  }
  if (globalThis.self === undefined) def(globalThis, 'self', globalThis);

  return { register, call, finishCall, approvalWhen, approvalDescription, instructions };
});
