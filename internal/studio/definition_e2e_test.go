package studio_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/studio"
)

// TestChatDefinitionPanel: the playground's Agent panel shows the agent's
// models, its tools with their parameter schemas, its subagents and
// editable state keys, and each of its MCP servers as the server's live
// MCP client has it: the fixture (tests/mcp/server.mjs over stdio)
// "connected · N tools", one at a dead URL "failed" with the connection
// error. No header or env value of a server reaches the page.
func TestChatDefinitionPanel(t *testing.T) {
	t.Parallel()
	node, dir := stacktest.NodeFixture(t, "mcp", "@modelcontextprotocol/sdk/package.json", "zod/package.json")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close() // nothing listens there
	const secret = "sk-mcp-header-secret-0123456789"
	env := stacktest.New(t, stacktest.Options{Agents: func(env *stacktest.Env) []*agent.Spec {
		a := stacktest.DefaultAgents(env, "openai/test-model")[0]
		a.Name = "withmcp"
		a.Fallbacks = []string{"openai/backup-model"}
		a.Subagents = []agent.Subagent{{Name: "researcher", Description: "Digs up facts"}}
		a.MCPServers = []agent.MCPServer{
			{Name: "fx", Command: node, Args: []string{filepath.Join(dir, "server.mjs")}, Env: map[string]string{"MCP_TOKEN": secret}},
			{Name: "dead", URL: dead, Headers: map[string]string{"Authorization": "Bearer " + secret}},
		}
		a.Secrets = []string{secret}
		return []*agent.Spec{a}
	}})

	// The server's live state: how many tools the connected fixture gave.
	var fxTools int
	stacktest.WaitFor(t, "the fixture to connect", func() bool {
		for _, s := range agentInfo(t, env, "withmcp").MCPServers {
			if s.Name == "fx" && s.Status == "connected" {
				fxTools = len(s.Tools)
				return true
			}
		}
		return false
	})
	if fxTools == 0 {
		t.Fatal("the connected fixture gave no tools")
	}

	p := newPage(t)
	openChat(p, env.URL, "withmcp", "def-1")
	def := "#chat-agent-def"
	p.waitText(def+` li[data-mcp="fx"] .badge`, fmt.Sprintf("connected · %d tools", fxTools))
	p.waitText(def+` li[data-mcp="fx"] .mcp-tools li[data-tool="fx_lookup"] pre.tool-schema`, `"query"`)
	if n := eval[int](p, `document.querySelectorAll('#chat-agent-def li[data-tool="fx_lookup"]').length`); n != 1 {
		t.Fatalf("the MCP tool is listed %d times, want once, under its server", n)
	}
	p.waitText(def+` li[data-mcp="dead"] .badge`, "failed")
	p.waitText(def+` li[data-mcp="dead"] .mcp-error`, "connect")
	p.waitText("#chat-def-model", "openai/test-model then openai/backup-model")
	p.waitText(def+` li[data-tool="get_weather"] pre.tool-schema`, `"city"`)
	p.waitText(def+` li[data-tool="refund"]`, "needs approval")
	p.waitText(def+" .def-subagents", "researcher — Digs up facts")
	p.waitText("#chat-def-editable", "draft")
	if html := eval[string](p, `document.querySelector('#main').innerHTML`); strings.Contains(html, secret) {
		t.Fatal("an MCP server's secret reached the page")
	}
	// The picker and the panel (a long connection error, open schemas)
	// fit a 1280 px screen in light mode and a phone's in dark mode.
	eval[bool](p, `([...document.querySelectorAll('#chat-agent-def details')].forEach((d) => { d.open = true; }), true)`)
	noOverflow := `document.documentElement.scrollWidth <= window.innerWidth + 1`
	p.do(chromedp.EmulateViewport(1280, 1000))
	if !eval[bool](p, noOverflow) {
		t.Fatalf("the page is %d px wide at 1280", eval[int](p, `document.documentElement.scrollWidth`))
	}
	p.do(chromedp.EmulateViewport(390, 1000))
	p.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	p.waitJS("dark colours", `getComputedStyle(document.body).backgroundColor !== 'rgb(246, 247, 249)'`)
	if !eval[bool](p, noOverflow) {
		t.Fatalf("the page is %d px wide on a 390 px screen: %s", eval[int](p, `document.documentElement.scrollWidth`),
			eval[string](p, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(0, 8).map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`))
	}
}

// agentInfo is one agent as GET /studio/api/agents gives it (dev mode).
func agentInfo(t *testing.T, env *stacktest.Env, name string, hdr ...string) studio.AgentInfo {
	t.Helper()
	r := do(t, "GET", env.URL+"/studio/api/agents", "", hdr...)
	var page struct {
		Data []studio.AgentInfo `json:"data"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || r.status != 200 {
		t.Fatalf("agents: %d %s", r.status, r)
	}
	for _, a := range page.Data {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no agent %s in %s", name, r)
	return studio.AgentInfo{}
}

// TestAgentsAPIPickModels: the agents API lists each agent's models, and
// the ones a playground run may pick only in dev (a start server refuses
// forwardedProps.model, so its page offers no picker).
func TestAgentsAPIPickModels(t *testing.T) {
	t.Parallel()
	agents := func(env *stacktest.Env) []*agent.Spec {
		specs := stacktest.DefaultAgents(env, "openai/test-model")
		specs[0].Fallbacks = []string{"openai/backup-model"}
		return specs
	}
	dev := stacktest.New(t, stacktest.Options{Agents: agents})
	a := agentInfo(t, dev, "assistant")
	if strings.Join(a.Models, ",") != "openai/test-model,openai/backup-model" || strings.Join(a.PickModels, ",") != strings.Join(a.Models, ",") {
		t.Fatalf("dev: models %v, pickModels %v", a.Models, a.PickModels)
	}
	key := config.Key{Tenant: "acme", Secret: "sk-acme-pick-0123456789", Role: config.RoleAdmin, Label: "ops"}
	start := stacktest.New(t, stacktest.Options{Mode: config.Start, Keys: []config.Key{key}, Agents: agents})
	a = agentInfo(t, start, "assistant", "Authorization", "Bearer "+key.Secret)
	if len(a.Models) != 2 || a.PickModels == nil || len(a.PickModels) != 0 {
		t.Fatalf("start: models %v, pickModels %v (want none to pick)", a.Models, a.PickModels)
	}
}
