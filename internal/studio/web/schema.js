// A small JSON Schema validator: the subset tool parameter schemas use.
// Keywords: type (one or a list; integer, number, string, boolean, object,
// array, null), properties, required, additionalProperties (boolean or
// schema), enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// minLength, maxLength, pattern, items, minItems, maxItems. Unknown keywords
// are ignored (the server validates fully; this check only spares a round
// trip and names the field).
//
// validate(schema, value) returns a list of problems, each
// {path: "/amount", field: "amount", message: "must be a number, not a string"}.

export function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v; // string, boolean, object
}

function matchesType(v, t) {
  const actual = typeOf(v);
  if (t === 'number') return actual === 'number' || actual === 'integer';
  return actual === t;
}

const article = (t) => (/^[aeiou]/.test(t) ? 'an ' : 'a ') + t;

function pointer(path) {
  return path.length === 0 ? '' : '/' + path.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
}

function fieldName(path) {
  return path.length === 0 ? 'arguments' : path.map((p, i) => (typeof p === 'number' ? `[${p}]` : (i ? '.' : '') + p)).join('');
}

function equal(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function check(schema, v, path, out) {
  if (schema === true || schema === undefined || schema === null) return;
  const add = (message, at = path) => out.push({ path: pointer(at), field: fieldName(at), message });
  if (schema === false) {
    add('is not allowed');
    return;
  }
  if (typeof schema !== 'object') return;

  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => matchesType(v, t))) {
      add(`must be ${types.map(article).join(' or ')}, not ${article(typeOf(v))}`);
      return; // further keywords would only repeat the type problem
    }
  }
  if (schema.enum !== undefined && !schema.enum.some((e) => equal(e, v))) {
    add(`must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`);
  }
  if (schema.const !== undefined && !equal(schema.const, v)) {
    add(`must be ${JSON.stringify(schema.const)}`);
  }
  if (typeof v === 'number') {
    if (typeof schema.minimum === 'number' && v < schema.minimum) add(`must be at least ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && v > schema.maximum) add(`must be at most ${schema.maximum}`);
    if (typeof schema.exclusiveMinimum === 'number' && v <= schema.exclusiveMinimum) add(`must be greater than ${schema.exclusiveMinimum}`);
    if (typeof schema.exclusiveMaximum === 'number' && v >= schema.exclusiveMaximum) add(`must be less than ${schema.exclusiveMaximum}`);
  }
  if (typeof v === 'string') {
    const n = [...v].length;
    if (typeof schema.minLength === 'number' && n < schema.minLength) add(`must be at least ${schema.minLength} characters long`);
    if (typeof schema.maxLength === 'number' && n > schema.maxLength) add(`must be at most ${schema.maxLength} characters long`);
    if (typeof schema.pattern === 'string') {
      let re = null;
      try { re = new RegExp(schema.pattern, 'u'); } catch { re = null; }
      if (re && !re.test(v)) add(`must match the pattern ${schema.pattern}`);
    }
  }
  if (Array.isArray(v)) {
    if (typeof schema.minItems === 'number' && v.length < schema.minItems) add(`must have at least ${schema.minItems} items`);
    if (typeof schema.maxItems === 'number' && v.length > schema.maxItems) add(`must have at most ${schema.maxItems} items`);
    if (Array.isArray(schema.items)) {
      schema.items.forEach((s, i) => { if (i < v.length) check(s, v[i], [...path, i], out); });
    } else if (schema.items !== undefined) {
      v.forEach((item, i) => check(schema.items, item, [...path, i], out));
    }
  }
  if (typeOf(v) === 'object') {
    const props = schema.properties || {};
    for (const name of schema.required || []) {
      if (!Object.prototype.hasOwnProperty.call(v, name)) add('is required', [...path, name]);
    }
    for (const [name, val] of Object.entries(v)) {
      if (Object.prototype.hasOwnProperty.call(props, name)) {
        check(props[name], val, [...path, name], out);
      } else if (schema.additionalProperties === false) {
        add('is not an allowed field', [...path, name]);
      } else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
        check(schema.additionalProperties, val, [...path, name], out);
      }
    }
  }
  for (const s of schema.allOf || []) check(s, v, path, out);
}

export function validate(schema, value) {
  const out = [];
  check(schema, value, [], out);
  return out;
}

// describe renders problems as one line each: "amount: must be a number, not a string".
export function describe(problems) {
  return problems.map((p) => `${p.field}: ${p.message}`);
}
