// The virtual module 'stackbone' that agent files import. It is bundled into
// every agent and re-exports the helpers the host prelude installed.
const sb = globalThis.__stackbone;
export const defineDeepAgent = sb.defineDeepAgent;
export const tool = sb.tool;
export default { defineDeepAgent, tool };
