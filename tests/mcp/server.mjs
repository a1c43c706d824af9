// An MCP server written with the official TypeScript SDK, used by the Go
// tests as a server agents connect to. Over stdio by default; with
// `--http PORT` over streamable HTTP on 127.0.0.1:PORT at /mcp (it prints
// {"port":N} on stdout once listening; PORT 0 picks one).
//
// Tools:
//   lookup         readOnlyHint: true           -> "found: <query>"
//   delete_record  destructiveHint: true        -> "deleted <id>"
//   touch          no annotations               -> "touched <id>"
//   fail           readOnlyHint: true           -> isError with "<reason>"
//   stats          readOnlyHint, structured     -> structuredContent {records, ok}
//   enable_extra   readOnlyHint                 -> registers `extra` (tools/list_changed)
//   elicit_confirm readOnlyHint                 -> asks the client (elicitation/create)
//   snapshot      readOnlyHint                  -> text and an image
//   big            readOnlyHint                 -> <bytes> bytes of text (default 4 MB)
//
// Environment: MCP_PID_FILE gets the process id; MCP_CALLS_FILE gets one
// JSON line {"tool","args"} per call; MCP_REQUIRE_HEADER="Name: value"
// makes the HTTP server refuse requests without that header (401);
// MCP_LINGER=1 keeps the process running after its stdin closes (as servers
// with other work, a watcher or a listener, do);
// MCP_ECHO_ENV=NAME prints NAME's value on stderr at start and adds the
// tool `show_env` -> "env: <value>" (a server that leaks its secret).
import { appendFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

// A 1×1 PNG, for the image result of `snapshot`.
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

if (process.env.MCP_LINGER) setInterval(() => {}, 1000);
if (process.env.MCP_PID_FILE) writeFileSync(process.env.MCP_PID_FILE, String(process.pid));
const echoEnv = process.env.MCP_ECHO_ENV;
if (echoEnv) process.stderr.write(`starting with ${echoEnv}=${process.env[echoEnv]}\n`);

function record(tool, args) {
  if (process.env.MCP_CALLS_FILE) appendFileSync(process.env.MCP_CALLS_FILE, JSON.stringify({ tool, args }) + '\n');
}

const text = (t) => ({ content: [{ type: 'text', text: t }] });
let extraEnabled = false;
const servers = new Set();

function addExtra(server) {
  server.registerTool(
    'extra',
    { description: 'A tool added at run time', inputSchema: {}, annotations: { readOnlyHint: true } },
    async () => {
      record('extra', {});
      return text('extra ran');
    },
  );
}

function newServer() {
  const server = new McpServer({ name: 'fixture', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  server.registerTool(
    'lookup',
    { description: 'Look a record up', inputSchema: { query: z.string() }, annotations: { readOnlyHint: true } },
    async ({ query }) => {
      record('lookup', { query });
      return text(`found: ${query}`);
    },
  );
  server.registerTool(
    'delete_record',
    { description: 'Delete a record', inputSchema: { id: z.string() }, annotations: { destructiveHint: true } },
    async ({ id }) => {
      record('delete_record', { id });
      return text(`deleted ${id}`);
    },
  );
  server.registerTool('touch', { description: 'Touch a record', inputSchema: { id: z.string() } }, async ({ id }) => {
    record('touch', { id });
    return text(`touched ${id}`);
  });
  server.registerTool(
    'fail',
    { description: 'Always fails', inputSchema: { reason: z.string() }, annotations: { readOnlyHint: true } },
    async ({ reason }) => {
      record('fail', { reason });
      return { content: [{ type: 'text', text: `cannot do it: ${reason}` }], isError: true };
    },
  );
  server.registerTool(
    'stats',
    {
      description: 'Record statistics',
      inputSchema: {},
      outputSchema: { records: z.number(), ok: z.boolean() },
      annotations: { readOnlyHint: true, idempotentHint: true },
    },
    async () => {
      record('stats', {});
      const out = { records: 42, ok: true };
      return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
    },
  );
  server.registerTool(
    'snapshot',
    { description: 'A picture of the record', inputSchema: {}, annotations: { readOnlyHint: true } },
    async () => {
      record('snapshot', {});
      return { content: [{ type: 'text', text: 'the record:' }, { type: 'image', data: PIXEL, mimeType: 'image/png' }] };
    },
  );
  server.registerTool(
    'big',
    { description: 'A large file', inputSchema: { bytes: z.number().optional() }, annotations: { readOnlyHint: true } },
    async ({ bytes }) => {
      record('big', { bytes });
      return text('0123456789abcdef'.repeat(Math.ceil((bytes ?? 4 << 20) / 16)).slice(0, bytes ?? 4 << 20));
    },
  );
  server.registerTool(
    'enable_extra',
    { description: 'Add the extra tool', inputSchema: {}, annotations: { readOnlyHint: true } },
    async () => {
      record('enable_extra', {});
      if (!extraEnabled) {
        extraEnabled = true;
        for (const s of servers) addExtra(s); // each sends tools/list_changed
      }
      return text('extra enabled');
    },
  );
  server.registerTool(
    'elicit_confirm',
    { description: 'Ask the user to confirm', inputSchema: { what: z.string() }, annotations: { readOnlyHint: true } },
    async ({ what }) => {
      record('elicit_confirm', { what });
      const res = await server.server.elicitInput({
        message: `Confirm ${what}?`,
        requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean', title: 'Confirm' } }, required: ['confirm'] },
      });
      return text(`elicitation: ${res.action} ${JSON.stringify(res.content ?? null)}`);
    },
  );
  if (echoEnv) {
    server.registerTool('show_env', { description: 'Show the secret', inputSchema: {}, annotations: { readOnlyHint: true } }, async () => {
      record('show_env', {});
      return text(`env: ${process.env[echoEnv]}`);
    });
  }
  if (extraEnabled) addExtra(server);
  servers.add(server);
  return server;
}

const httpAt = process.argv.indexOf('--http');
if (httpAt < 0) {
  await newServer().connect(new StdioServerTransport());
} else {
  const port = Number(process.argv[httpAt + 1] || 0);
  const required = process.env.MCP_REQUIRE_HEADER ? process.env.MCP_REQUIRE_HEADER.split(/:\s*/, 2) : null;
  const transports = new Map(); // session id -> transport
  const http = createServer(async (req, res) => {
    if (!req.url.startsWith('/mcp')) {
      res.writeHead(404).end();
      return;
    }
    if (required && req.headers[required[0].toLowerCase()] !== required[1]) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    const sid = req.headers['mcp-session-id'];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(
          '{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}',
        );
        return;
      }
      const server = newServer();
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) transports.delete(transport.sessionId);
        servers.delete(server);
      };
      await server.connect(transport);
    }
    await transport.handleRequest(req, res);
  });
  http.listen(port, '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ port: http.address().port }) + '\n');
  });
}
