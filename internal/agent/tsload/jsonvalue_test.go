package tsload

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dop251/goja"

	"github.com/stackbone/stackbone/internal/tool"
)

// sameAsJSONParse is JS that compares two values the way user code could
// tell them apart: types, Object.is for primitives (so -0 and NaN count),
// prototypes, own keys in order, property attributes, recursively.
const sameAsJSONParse = `(function same(a, b, path) {
  path = path || '$';
  if (typeof a !== typeof b) return path + ': typeof ' + typeof a + ' vs ' + typeof b;
  if (a === null || typeof a !== 'object') return Object.is(a, b) ? '' : path + ': ' + String(a) + ' vs ' + String(b);
  if (b === null) return path + ': null';
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return path + ': prototype';
  if (Array.isArray(a) !== Array.isArray(b)) return path + ': Array.isArray';
  if (Object.isExtensible(a) !== Object.isExtensible(b)) return path + ': extensible';
  const ka = Reflect.ownKeys(a), kb = Reflect.ownKeys(b);
  if (JSON.stringify(ka) !== JSON.stringify(kb)) return path + ': keys ' + JSON.stringify(ka) + ' vs ' + JSON.stringify(kb);
  for (const k of ka) {
    const da = Object.getOwnPropertyDescriptor(a, k), db = Object.getOwnPropertyDescriptor(b, k);
    for (const f of ['writable', 'enumerable', 'configurable']) {
      if (da[f] !== db[f]) return path + '.' + k + ': ' + f;
    }
    const d = same(da.value, db.value, path + '.' + k);
    if (d) return d;
  }
  return JSON.stringify(a) === JSON.stringify(b) ? '' : path + ': JSON.stringify';
})`

// jsonParseChecker returns a function reporting how the native decoder's
// value for text differs from JSON.parse's ("" when it does not), and
// whether the native decoder took the text at all.
func jsonParseChecker(t testing.TB) func(text string) (diff string, native bool, parseErr error) {
	vm := goja.New()
	r := &jsRuntime{vm: vm}
	sameV, err := vm.RunString(sameAsJSONParse)
	if err != nil {
		t.Fatal(err)
	}
	same, _ := goja.AssertFunction(sameV)
	parse, _ := goja.AssertFunction(vm.Get("JSON").ToObject(vm).Get("parse"))
	return func(text string) (string, bool, error) {
		want, perr := parse(goja.Undefined(), vm.ToValue(text))
		got, ok := r.jsonValue(text)
		if !ok {
			return "", false, perr
		}
		if perr != nil {
			return "JSON.parse throws " + perr.Error() + " but the native decoder accepted it", true, perr
		}
		d, err := same(goja.Undefined(), got, want)
		if err != nil {
			t.Fatal(err)
		}
		return d.String(), true, nil
	}
}

// jsonCases are texts the native decoder must decode exactly like JSON.parse.
var jsonCases = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `"s"`, ` {"a" : 1 } `, "\t\n\r[1]\n",
	`{"zeta":1,"alpha":{"y":[1,"two",null,true,false,{"k":[]}],"x":{}},"mid":"m"}`,
	`{"b":1,"a":2,"10":3,"2":4,"-1":5,"1.5":6}`,
	`{"a":1,"b":2,"a":3}`,
	`{"__proto__":{"polluted":true},"constructor":1,"toString":"x","hasOwnProperty":null}`,
	`[0,-0,1,-1,1.5,-2.25,1e3,1E-7,2e+2,0.1,123456789,9007199254740991,9007199254740993,12345678901234567890,-12345678901234567890]`,
	`[1.7976931348623157e308,5e-324,1e-400,4.9e-324,2147483647,2147483648,-2147483649,1e21,1e-7,100.0,3.0e0]`,
	`["", "héllo", "日本語", "😀", "\u00e9", "\ud83d\ude00", "\ud800", "\udc00x", "\ud800\u0041", "a\"b\\c\/d\b\f\n\r\t", "\u0000", "` + "\u007f" + `"]`,
	`{"ключ":"значение","😀":"emoji key","":"empty key","a\u0000b":1}`,
	`[[[[[[[[[[[[[[[[[[[[{"deep":[[["x"]]]}]]]]]]]]]]]]]]]]]]]]`,
	`{"orderId":"o1","amount":19.99,"items":[{"sku":"a","qty":2},{"sku":"b","qty":1,"tags":["x","y"]}],"note":null,"rush":false}`,
}

// jsonBad are texts JSON.parse rejects; the native decoder must not accept
// them (the prelude then calls JSON.parse, which throws as before).
var jsonBad = []string{
	``, ` `, `{`, `}`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a" 1}`, `{a:1}`, `{'a':1}`, `[1 2]`, `01`, `1.`, `.5`, `+1`,
	`-`, `1e`, `1e+`, `0x10`, `NaN`, `Infinity`, `nul`, `tru`, `True`, `"abc`, `"\x"`, `"\u12"`, "\"a\nb\"", "\"\x01\"",
	`{"a":1}x`, `1 2`, `"a" "b"`, `[1e400]`, `-1e400`, "\xff", `// c` + "\n1", "\ufeff1",
	strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
}

// jsonFallback are texts JSON.parse decodes that the native decoder leaves
// to it: invalid UTF-8 (which the JS string holds as U+FFFD) and nesting
// deeper than maxJSONDepth.
var jsonFallback = []string{
	"\"\xc3\x28\"", "[\"a\xffb\"]",
	strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
}

func TestJSONValueMatchesJSONParse(t *testing.T) {
	check := jsonParseChecker(t)
	for _, text := range jsonCases {
		d, native, err := check(text)
		if err != nil {
			t.Fatalf("JSON.parse(%s): %v", text, err)
		}
		if !native {
			t.Errorf("the native decoder left %s to JSON.parse", text)
		}
		if d != "" {
			t.Errorf("%s: native value differs from JSON.parse: %s", text, d)
		}
	}
	for _, text := range jsonBad {
		d, native, err := check(text)
		if native {
			t.Errorf("the native decoder accepted %.40q: %s", text, d)
		}
		if err == nil && text != strings.Repeat("[", 20000)+strings.Repeat("]", 20000) {
			t.Errorf("JSON.parse accepted %.40q (the case belongs in jsonCases)", text)
		}
	}
	for _, text := range jsonFallback {
		if _, native, err := check(text); native || err != nil {
			t.Errorf("%.40q: native=%v, JSON.parse error %v", text, native, err)
		}
	}
}

// FuzzJSONValue checks that whatever the native decoder accepts, JSON.parse
// accepts and decodes to an indistinguishable value.
func FuzzJSONValue(f *testing.F) {
	for _, s := range append(append([]string{}, jsonCases...), jsonBad[:len(jsonBad)-1]...) {
		f.Add(s)
	}
	check := jsonParseChecker(f)
	f.Fuzz(func(t *testing.T, text string) {
		if d, native, _ := check(text); native && d != "" {
			t.Fatalf("%q: %s", text, d)
		}
	})
}

// TestToolArgumentsArePlainObjects checks what execute receives: a plain,
// mutable object in the JSON's key order, whose mutation stays inside the
// call.
func TestToolArgumentsArePlainObjects(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/args.ts": `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({ name: 'args', model: 'openai/x', tools: {
  probe: tool({
    parameters: { type: 'object' },
    async execute(args, ctx) {
      const kind = (x) => (x === null ? 'null' : Array.isArray(x) ? 'array' : typeof x);
      const { text, ...rest } = args;
      const report = {
        keys: Object.keys(args),
        entries: Object.entries(args.nested).map(([k, v]) => k + ':' + kind(v)),
        proto: Object.getPrototypeOf(args) === Object.prototype && Object.getPrototypeOf(args.nested) === Object.prototype,
        instanceOfObject: args instanceof Object && args.nested instanceof Object,
        arrays: Array.isArray(args.list) && args.list instanceof Array && Object.getPrototypeOf(args.list) === Array.prototype,
        kinds: args.list.map(kind),
        mapped: args.list.filter((x) => typeof x === 'number').map((x) => x * 2),
        big: args.big, bigIsSafe: Number.isSafeInteger(args.big), safe: args.safe, safeExact: args.safe === 9007199254740991,
        float: args.float, floatSum: args.float + 0.2, negZero: Object.is(args.negZero, -0), exp: args.exp,
        unicode: args.unicode, unicodeLength: args.unicode.length, codePoints: Array.from(args.unicode).length,
        escaped: args.escaped, nul: args.nul === null, yes: args.yes === true, no: args.no === false,
        hasOwn: Object.hasOwn(args, 'text') && args.hasOwnProperty('nested') && 'list' in args,
        spread: Object.keys({ ...args, extra: 1 }), rest: Object.keys(rest), assign: Object.keys(Object.assign({}, args)),
        proto2: Object.getPrototypeOf(args.__proto__) === Object.prototype && Object.hasOwn(args, '__proto__'),
        json: JSON.stringify(args),
        clone: JSON.stringify(structuredClone(args.nested)) === JSON.stringify(args.nested),
        frozen: Object.isFrozen(args) || Object.isSealed(args) || !Object.isExtensible(args),
      };
      args.text = 'changed'; args.nested.deep.push(4); args.list[0] = 'x'; delete args.yes; args.added = [1];
      report.mutated = JSON.stringify(args);
      report.thread = ctx.threadId;
      return report;
    },
  }),
} });
`}, Options{})
	probe := mustTool(t, s, "probe")
	const argsJSON = `{"text":"hello","nested":{"z":1,"a":[1,2],"deep":[1,2,3],"m":{"k":"v"},"n":null},` +
		`"list":[1,"two",null,true,false,{"x":1},[2],-3.5],"big":12345678901234567890,"safe":9007199254740991,` +
		`"float":0.1,"negZero":-0,"exp":1.5e-7,"unicode":"héllo 日本 😀","escaped":"\u00e9\ud83d\ude00\n\"q\"",` +
		`"nul":null,"yes":true,"no":false,"__proto__":{"own":true}}`
	call := tool.Call{ThreadID: "th_a", ToolCallID: "c1", Args: json.RawMessage(argsJSON)}
	var first string
	for i := range 3 { // pooled runtimes are reused: no call sees another's mutation
		res, err := probe.Execute(context.Background(), call)
		if err != nil {
			t.Fatal(err)
		}
		if string(call.Args) != argsJSON {
			t.Fatalf("call %d changed the call's arguments: %s", i, call.Args)
		}
		if i == 0 {
			first = res.Content
		} else if res.Content != first {
			t.Fatalf("call %d saw another call's mutation:\n%s\nfirst:\n%s", i, res.Content, first)
		}
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(first), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"keys":             `["text","nested","list","big","safe","float","negZero","exp","unicode","escaped","nul","yes","no","__proto__"]`,
		"entries":          `["z:number","a:array","deep:array","m:object","n:null"]`,
		"proto":            `true`,
		"instanceOfObject": `true`,
		"arrays":           `true`,
		"kinds":            `["number","string","null","boolean","boolean","object","array","number"]`,
		"mapped":           `[2,-7]`,
		"big":              `12345678901234567000`,
		"bigIsSafe":        `false`,
		"safe":             `9007199254740991`,
		"safeExact":        `true`,
		"float":            `0.1`,
		"floatSum":         `0.30000000000000004`,
		"negZero":          `true`,
		"exp":              `1.5e-7`,
		"unicode":          `"héllo 日本 😀"`,
		"unicodeLength":    `11`,
		"codePoints":       `10`,
		"escaped":          `"é😀\n\"q\""`,
		"nul":              `true`,
		"yes":              `true`,
		"no":               `true`,
		"hasOwn":           `true`,
		"spread":           `["text","nested","list","big","safe","float","negZero","exp","unicode","escaped","nul","yes","no","__proto__","extra"]`,
		"rest":             `["nested","list","big","safe","float","negZero","exp","unicode","escaped","nul","yes","no","__proto__"]`,
		"assign":           `["text","nested","list","big","safe","float","negZero","exp","unicode","escaped","nul","yes","no"]`,
		"proto2":           `true`,
		"clone":            `true`,
		"frozen":           `false`,
		"thread":           `"th_a"`,
		"json": `"{\"text\":\"hello\",\"nested\":{\"z\":1,\"a\":[1,2],\"deep\":[1,2,3],\"m\":{\"k\":\"v\"},\"n\":null},` +
			`\"list\":[1,\"two\",null,true,false,{\"x\":1},[2],-3.5],\"big\":12345678901234567000,\"safe\":9007199254740991,` +
			`\"float\":0.1,\"negZero\":0,\"exp\":1.5e-7,\"unicode\":\"héllo 日本 😀\",\"escaped\":\"é😀\\n\\\"q\\\"\",` +
			`\"nul\":null,\"yes\":true,\"no\":false,\"__proto__\":{\"own\":true}}"`,
		"mutated": `"{\"text\":\"changed\",\"nested\":{\"z\":1,\"a\":[1,2],\"deep\":[1,2,3,4],\"m\":{\"k\":\"v\"},\"n\":null},` +
			`\"list\":[\"x\",\"two\",null,true,false,{\"x\":1},[2],-3.5],\"big\":12345678901234567000,\"safe\":9007199254740991,` +
			`\"float\":0.1,\"negZero\":0,\"exp\":1.5e-7,\"unicode\":\"héllo 日本 😀\",\"escaped\":\"é😀\\n\\\"q\\\"\",` +
			`\"nul\":null,\"no\":false,\"__proto__\":{\"own\":true},\"added\":[1]}"`,
	}
	for k, w := range want {
		g, _ := json.Marshal(got[k])
		if string(g) != w {
			t.Errorf("%s = %s, want %s", k, g, w)
		}
	}
	if len(got) != len(want)+0 {
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unchecked report field %s", k)
			}
		}
	}

	// Arguments that are not valid JSON fail as JSON.parse fails.
	_, err := probe.Execute(context.Background(), tool.Call{Args: json.RawMessage(`{"text":`)})
	if err == nil || !strings.HasPrefix(err.Error(), "SyntaxError: ") {
		t.Fatalf("bad JSON arguments: %v", err)
	}
}

// TestZodParsesNativeArguments runs a zod schema (nested objects, arrays,
// defaults, transforms) over the arguments the host builds.
func TestZodParsesNativeArguments(t *testing.T) {
	fixture := zodFixture(t)
	dir := writeProject(t, map[string]string{"agents/z.ts": `import { defineDeepAgent, tool } from 'stackbone';
import { z } from 'zod';
export default defineDeepAgent({ name: 'z', model: 'openai/x', tools: {
  order: tool({
    parameters: z.object({
      id: z.string().min(1),
      lines: z.array(z.object({ sku: z.string(), qty: z.number().int().positive() })).min(1),
      meta: z.object({ note: z.string().nullable(), tags: z.array(z.string()).default([]) }),
      total: z.number().transform((n) => Math.round(n * 100)),
    }),
    async execute(a) { return { id: a.id, skus: a.lines.map((l) => l.sku + 'x' + l.qty), note: a.meta.note, tags: a.meta.tags, cents: a.total, keys: Object.keys(a) }; },
  }),
} });
`})
	if err := os.Symlink(filepath.Join(fixture, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	specs := mustLoad(t, dir, Options{})
	res, err := run(t, specs[0], "order", `{"total":12.345,"meta":{"note":null},"id":"o1","lines":[{"sku":"a","qty":2},{"qty":1,"sku":"b"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"o1","skus":["ax2","bx1"],"note":null,"tags":[],"cents":1235,"keys":["id","lines","meta","total"]}`; res.Content != want {
		t.Fatalf("content = %s, want %s", res.Content, want)
	}
	if _, err := run(t, specs[0], "order", `{"id":"o1","lines":[{"sku":"a","qty":1.5}],"meta":{"note":1},"total":1}`); err == nil ||
		!strings.Contains(err.Error(), "lines.0.qty: ") || !strings.Contains(err.Error(), "meta.note: ") {
		t.Fatalf("invalid = %v", err)
	}
}

// TestStateChangeIsJudgedOnContent checks that a call's result carries a
// state only when the state's content changed, whatever the stored text's
// spelling (spaces, escapes, number forms, Go's HTML escaping).
func TestStateChangeIsJudgedOnContent(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/st.ts": `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({ name: 'st', model: 'openai/x', tools: {
  read: tool({ execute(_a, ctx) { return Object.keys(ctx.state).join(','); } }),
  same: tool({ execute(_a, ctx) { ctx.state.n = ctx.state.n; ctx.state = JSON.parse(JSON.stringify(ctx.state)); } }),
  bump: tool({ execute(_a, ctx) { ctx.state.n += 1; } }),
  none: tool({ execute() { return 'x'; } }),
} });
`}, Options{})
	exec := func(name, state string) tool.Result {
		t.Helper()
		res, err := mustTool(t, s, name).Execute(context.Background(), tool.Call{Args: json.RawMessage(`{}`), State: json.RawMessage(state)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, state := range []string{
		`{"n":1,"s":"<a>","f":0.5,"l":[1,{"k":null}]}`,
		`{ "n": 1.0, "s": "\u003ca\u003e", "f": 5e-1, "l": [ 1, { "k": null } ] }`,
		`{"n":1,"s":"\u003ca>","f":0.50,"l":[1E0,{"k":null}]}`,
	} {
		for _, name := range []string{"read", "same", "none"} {
			if res := exec(name, state); res.State != nil {
				t.Errorf("%s on %s: state %s, want unchanged", name, state, res.State)
			}
		}
		if got := exec("bump", state).State; string(got) != `{"n":2,"s":"<a>","f":0.5,"l":[1,{"k":null}]}` {
			t.Errorf("bump on %s: state %s", state, got)
		}
	}
	for _, state := range []string{``, `null`, `[]`, `"x"`, `{}`} {
		if res := exec("read", state); res.State != nil || res.Content != "" {
			t.Errorf("read on %q: %+v", state, res)
		}
		if got := exec("same", state).State; got != nil {
			t.Errorf("same on %q: state %s, want unchanged", state, got)
		}
	}
}

// TestCtxStateBehavesAsAPlainProperty covers the ways a tool can reach
// ctx.state: reads see one object, writes and replacements come back, a
// deleted or non-object state fails the call, an untouched state is
// unchanged.
func TestCtxStateBehavesAsAPlainProperty(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/cs.ts": `import { defineDeepAgent, tool } from 'stackbone';
export default defineDeepAgent({ name: 'cs', model: 'openai/x', tools: {
  keys: tool({ execute(_a, ctx) { return Object.keys(ctx).join(',') + '|' + Object.keys({ ...ctx }.state).join(','); } }),
  same: tool({ execute(_a, ctx) { const { state } = ctx; return String(state === ctx.state && ctx.state === ctx.state); } }),
  later: tool({ async execute(_a, ctx) { await new Promise((r) => setTimeout(r, 1)); ctx.state.n = 5; } }),
  setThenRead: tool({ execute(_a, ctx) { ctx.state = { a: 1 }; ctx.state.b = 2; } }),
  define: tool({ execute(_a, ctx) { Object.defineProperty(ctx, 'state', { value: { d: 1 }, writable: true, enumerable: true, configurable: true }); } }),
  remove: tool({ execute(_a, ctx) { delete ctx.state; } }),
  notObject: tool({ execute(_a, ctx) { ctx.state = [1]; } }),
  ignore: tool({ execute() { return 'x'; } }),
} });
`}, Options{})
	exec := func(name string) (tool.Result, error) {
		return mustTool(t, s, name).Execute(context.Background(), tool.Call{Args: json.RawMessage(`{}`), State: json.RawMessage(`{"n":1,"m":{"k":[1]}}`)})
	}
	for name, want := range map[string]string{
		"keys":        `fetch,state,threadId,toolCallId,idempotencyKey,agent,user,env,signal,store|n,m;`,
		"same":        `true;`,
		"later":       `;{"n":5,"m":{"k":[1]}}`,
		"setThenRead": `;{"a":1,"b":2}`,
		"define":      `;{"d":1}`,
		"ignore":      `x;`,
	} {
		res, err := exec(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := res.Content + ";" + string(res.State); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	for _, name := range []string{"remove", "notObject"} {
		if _, err := exec(name); err == nil || err.Error() != "TypeError: ctx.state must stay a plain object" {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// TestToolReturnForms covers what execute may return or throw, sync or
// async: every form reaches the caller as before.
func TestToolReturnForms(t *testing.T) {
	s := loadOne(t, map[string]string{"agents/rf.ts": `import { defineDeepAgent, tool } from 'stackbone';
const asyncSchema = { '~standard': { version: 1, vendor: 'test', validate: async (v) => (v.n > 0 ? { value: { n: v.n * 2 } } : { issues: [{ message: 'n must be positive', path: ['n'] }] }) } };
export default defineDeepAgent({ name: 'rf', model: 'openai/x', tools: {
  syncValue: tool({ execute: (a) => ({ got: a.x }) }),
  syncString: tool({ execute: () => 'plain' }),
  syncThrow: tool({ execute: () => { throw new RangeError('too far'); } }),
  syncThrowValue: tool({ execute: () => { throw { code: 7 }; } }),
  thenable: tool({ execute: (a, ctx) => ({ then(res) { ctx.state.t = 1; res({ via: 'thenable' }); } }) }),
  rejects: tool({ execute: () => Promise.reject(new TypeError('nope')) }),
  asyncThrow: tool({ async execute() { await null; throw new Error('late'); } }),
  circular: tool({ execute: () => { const o = {}; o.o = o; return o; } }),
  badState: tool({ async execute(_a, ctx) { ctx.state = 'x'; return 'ok'; } }),
  validated: tool({ parameters: asyncSchema, jsonSchema: { type: 'object' }, async execute(a, ctx) { ctx.state.n = a.n; return a; } }),
} });
`}, Options{})
	for _, c := range []struct{ name, args, want, err string }{
		{"syncValue", `{"x":[1]}`, `{"got":[1]};`, ""},
		{"syncString", `{}`, `plain;`, ""},
		{"syncThrow", `{}`, "", "RangeError: too far"},
		{"syncThrowValue", `{}`, "", `{"code":7}`},
		{"thenable", `{}`, `{"via":"thenable"};{"t":1}`, ""},
		{"rejects", `{}`, "", "TypeError: nope"},
		{"asyncThrow", `{}`, "", "late"},
		{"circular", `{}`, "", "TypeError: "},
		{"badState", `{}`, "", "TypeError: ctx.state must stay a plain object"},
		{"validated", `{"n":2}`, `{"n":4};{"n":4}`, ""},
		{"validated", `{"n":0}`, "", "invalid tool arguments: n: n must be positive"},
		{"syncValue", `{"x":`, "", "SyntaxError: "},
	} {
		res, err := run(t, s, c.name, c.args)
		if c.err != "" {
			var te *ToolError
			if err == nil || !strings.HasPrefix(err.Error(), c.err) || !errors.As(err, &te) {
				t.Errorf("%s(%s): error %v (%T), want %q", c.name, c.args, err, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s(%s): %v", c.name, c.args, err)
			continue
		}
		if got := res.Content + ";" + string(res.State); got != c.want {
			t.Errorf("%s(%s) = %s, want %s", c.name, c.args, got, c.want)
		}
	}
}
