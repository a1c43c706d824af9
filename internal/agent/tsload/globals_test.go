package tsload

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/tool"
)

// globalsAgent probes every Web global the host provides. Each check returns
// a value the Go test compares; a missing global shows up as a TypeError.
const globalsAgent = `import { defineDeepAgent, tool } from 'stackbone';

async function* gen() { yield 1; yield 2; }

export default defineDeepAgent({
  name: 'globals', model: 'openai/x',
  tools: {
    probe: tool({
      async execute(_args, ctx) {
        const out: Record<string, unknown> = {};
        console.log('log %s #%d', 'line', 7, { a: [1, 'x'] });
        console.info('info line');
        console.debug('debug line');
        console.warn('warn line');
        console.error('error line', new Error('boom'));

        const order: string[] = [];
        const t1 = setTimeout(() => order.push('cleared'), 5);
        clearTimeout(t1);
        setTimeout((x: string) => order.push(x), 20, 'timeout-20');
        setTimeout(() => order.push('timeout-0'), 0);
        queueMicrotask(() => order.push('microtask'));
        order.push('sync');
        let ticks = 0;
        await new Promise<void>((resolve) => {
          const iv = setInterval(() => { if (++ticks === 3) { clearInterval(iv); resolve(); } }, 2);
        });
        await new Promise((r) => setTimeout(r, 30));
        out.order = order;
        out.ticks = ticks;

        const u = new URL('/a b/c?x=1&y=two+words#frag', 'https://Example.COM:443/base/');
        u.searchParams.append('z', 'a&b');
        out.url = { href: u.href, host: u.host, pathname: u.pathname, origin: u.origin, y: u.searchParams.get('y'),
                    port: new URL('http://h:8080/').port, canParse: URL.canParse('nope') };
        out.usp = new URLSearchParams({ q: 'a b', n: '1' }).toString();

        const bytes = new TextEncoder().encode('héllo €');
        out.utf8 = { len: bytes.length, back: new TextDecoder().decode(bytes), view: new TextDecoder().decode(bytes.subarray(7)) };
        out.b64 = { enc: btoa('hello'), dec: atob('aGVsbG8='), bad: (() => { try { btoa('€'); return 'no'; } catch (e: any) { return e.name; } })() };

        const id = crypto.randomUUID();
        out.uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id) && id !== crypto.randomUUID();
        const rnd = crypto.getRandomValues(new Uint8Array(32));
        out.random = rnd.some((b) => b !== 0);

        const src: any = { d: new Date(0), m: new Map([['k', { v: 1 }]]), s: new Set([1]), list: [1, { z: 2 }] };
        src.self = src;
        const c = structuredClone(src);
        c.list[1].z = 99;
        out.clone = { independent: src.list[1].z === 2, cycle: c.self === c, date: c.d instanceof Date && c.d.getTime() === 0,
                      map: c.m.get('k').v, set: c.s.has(1) };

        const r = await fetch(ctx.state.base + '/hello');
        out.fetch = { status: r.status, text: await r.text(), same: fetch === ctx.fetch };

        const seen: number[] = [];
        for await (const v of gen()) seen.push(v);
        out.forAwait = seen;
        out.withResolvers = typeof Promise.withResolvers;
        out.unicodeRegexp = /\p{L}+/u.test('héllo');
        return out;
      },
    }),
  },
});
`

func TestGlobalsProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hi from "+r.URL.Path)
	}))
	defer srv.Close()
	log, rec := newRecorder()
	s := loadOne(t, map[string]string{"agents/globals.ts": globalsAgent}, Options{Logger: log, HTTPClient: srv.Client()})

	if len(rec.find("WARN", `\p{`, "file=agents/globals.ts")) != 1 {
		t.Fatalf("want one warning about \\p{ in the bundle, log:\n%s", rec)
	}
	res, err := mustTool(t, s, "probe").Execute(context.Background(), tool.Call{
		Args: json.RawMessage(`{}`), State: json.RawMessage(`{"base":"` + srv.URL + `"}`),
	})
	if err != nil {
		t.Fatalf("probe: %v\nlog:\n%s", err, rec)
	}
	jsonEqual(t, res.Content, `{
		"order": ["sync", "microtask", "timeout-0", "timeout-20"],
		"ticks": 3,
		"url": {"href": "https://example.com/a%20b/c?x=1&y=two+words&z=a%26b#frag", "host": "example.com",
		        "pathname": "/a%20b/c", "origin": "https://example.com", "y": "two words", "port": "8080", "canParse": false},
		"usp": "q=a+b&n=1",
		"utf8": {"len": 10, "back": "héllo €", "view": "€"},
		"b64": {"enc": "aGVsbG8=", "dec": "hello", "bad": "InvalidCharacterError"},
		"uuid": true,
		"random": true,
		"clone": {"independent": true, "cycle": true, "date": true, "map": 1, "set": true},
		"fetch": {"status": 200, "text": "hi from /hello", "same": true},
		"forAwait": [1, 2],
		"withResolvers": "function",
		"unicodeRegexp": false
	}`)

	for _, want := range [][]string{
		{"INFO log line #7 { a: [ 1, \"x\" ] }", "source=console", "agent=globals", "tool=probe"},
		{"INFO info line"},
		{"DEBUG debug line"},
		{"WARN warn line"},
		{"ERROR error line Error: boom", "agents/globals.ts"},
	} {
		if len(rec.find(want...)) != 1 {
			t.Errorf("no log line with %q in:\n%s", want, rec)
		}
	}
}

func TestFetchOutsideACallAndBadURLs(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/f.ts": `import { defineDeepAgent, tool } from 'stackbone';
const early = fetch('http://127.0.0.1:1/').then(() => 'resolved', (e) => e.message);
let earlyResult = 'pending';
early.then((v) => { earlyResult = v; });
export default defineDeepAgent({ name: 'f', model: 'openai/x', tools: {
  early: tool({ execute: () => earlyResult }),
  relative: tool({ async execute() { try { await fetch('/x'); return 'no'; } catch (e: any) { return e.message; } } }),
  badURL: tool({ execute() { try { new URL('not a url'); return 'no'; } catch (e: any) { return e.name; } } }),
} });
`}, Options{})
	if res, err := run(t, s, "early", `{}`); err != nil || !strings.Contains(res.Content, "only available while a tool runs") {
		t.Fatalf("early = %q, %v", res.Content, err)
	}
	if res, err := run(t, s, "relative", `{}`); err != nil || !strings.Contains(res.Content, "only absolute http(s) URLs") {
		t.Fatalf("relative = %q, %v", res.Content, err)
	}
	if res, err := run(t, s, "badURL", `{}`); err != nil || res.Content != "TypeError" {
		t.Fatalf("badURL = %q, %v", res.Content, err)
	}
}
