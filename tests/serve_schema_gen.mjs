// The schemas of serve_schema.mjs: 300 JSON Schemas drawn from seeded PRNG
// streams (schema i is the same whether or not the others are drawn) in
// categories that cover objects, nesting, arrays, prefixItems, enum, const,
// anyOf, oneOf, $ref/$defs with recursion, type lists, formats, patterns and
// bounded numbers, each small enough that random text fits in max_tokens.

function mulberry32(a) {
  return () => {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function rng(seed) {
  const next = mulberry32(seed);
  const r = {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: p => next() < p,
    pick: a => a[Math.floor(next() * a.length)],
    shuffle: a => {
      const b = a.slice();
      for (let i = b.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [b[i], b[j]] = [b[j], b[i]];
      }
      return b;
    },
  };
  r.some = (a, lo, hi) => r.shuffle(a).slice(0, r.int(lo, Math.min(hi, a.length)));
  return r;
}

const KEYS = ["name", "age", "id", "title", "color", "count", "tags", "items", "ok", "value", "score", "kind",
              "note", "city", "size", "x", "y", "when", "owner", "level", "pet", "mood"];
// Keys and strings the grammar has to escape or encode as multi-byte UTF-8.
const ODD_KEYS = ["first name", "quo\"te", "back\\slash", "ünï", "a/b", "tab\tkey"];
const WORDS = ["red", "green", "blue", "cat", "dog", "sun", "moon", "tree", "a", "zz"];
const ODD_WORDS = ["with space", "quo\"te", "tab\there", "ünï", "emoji 🙂", "back\\slash", "new\nline", ""];
// No keyword may bound a format's length (the compiler refuses maxLength
// beside format), so an email ends in time only because its grammar is
// bounded: RFC 5321 caps the local part at 64 octets and the domain at 255.
const FORMATS = ["date", "time", "date-time", "uuid", "email"];
// Anchored regular expressions whose every repetition is bounded or ends at a
// character the model reaches by chance.
const PATTERNS = ["^[a-z]{2,5}-[0-9]{3}$", "^[A-Z][a-z]{1,6}$", "^(red|green|blue)$", "^\\d{3}-\\d{4}$",
                  "^[a-f0-9]{4,8}$", "^(ab){1,3}c?$", "^x[0-9]*y$", "^[A-Z]{2}[0-9]{2,4}$", "^v\\d\\.\\d{1,2}$",
                  "^[a-z]+(_[a-z]+)?$", "^(\\+|-)?[0-9]{1,4}$", "^[^\"\\\\]{1,6}$"];

function stringSchema(r) {
  const s = { type: "string" };
  if (r.chance(0.9)) {
    s.maxLength = r.int(1, 12);
    if (r.chance(0.3)) s.minLength = r.int(0, s.maxLength);
  } else if (r.chance(0.5)) {
    s.minLength = r.int(0, 3);
  }
  return s;
}

function integerSchema(r) {
  const s = { type: "integer" };
  const u = r.next();
  if (u < 0.5) {
    s.minimum = r.int(-500, 100);
    s.maximum = s.minimum + r.pick([0, 1, 9, 10, 99, 1000, r.int(0, 2000)]);
  } else if (u < 0.65) {
    s.minimum = r.pick([-100, -1, 0, 1, 7, 250]);
  } else if (u < 0.8) {
    s.maximum = r.pick([-50, -1, 0, 5, 99, 1000]);
  }
  return s;
}

function primitive(r) {
  const u = r.next();
  if (u < 0.4) return stringSchema(r);
  if (u < 0.65) return integerSchema(r);
  if (u < 0.8) return { type: "number" };
  if (u < 0.95) return { type: "boolean" };
  return { type: "null" };
}

function enumSchema(r) {
  const kind = r.pick(["strings", "strings", "numbers", "mixed"]);
  let values;
  if (kind === "strings") values = r.some(r.chance(0.2) ? ODD_WORDS : WORDS, 1, 5);
  else if (kind === "numbers") values = r.some([0, 1, 2, -3, 42, 2.5, -0.125, 1e3, 100000], 1, 5);
  else values = r.some(["a", "b", 1, -2, 3.5, true, false, null, "null", "1"], 2, 5);
  const s = { enum: values };
  if (kind === "strings" && r.chance(0.5)) s.type = "string";  // as zod writes it
  return s;
}

function constSchema(r) {
  return { const: r.pick(["x", "quo\"te", "ünï", 0, -7, 3.25, true, false, null, { a: 1, b: [true, "c"] }, [1, "two"], []]) };
}

function typeListSchema(r) {
  const types = r.pick([["string", "null"], ["integer", "null"], ["number", "string"], ["boolean", "null"],
                        ["integer", "string", "null"], ["array", "null"], ["object", "null"]]);
  const s = { type: types };
  if (types.includes("string")) s.maxLength = r.int(1, 10);
  if (types.includes("integer") && r.chance(0.5)) { s.minimum = r.int(-20, 0); s.maximum = r.int(0, 20); }
  if (types.includes("array")) { s.items = { type: "integer", minimum: 0, maximum: 9 }; s.maxItems = r.int(0, 3); }
  if (types.includes("object")) {
    s.properties = { k: stringSchema(r) };
    s.required = ["k"];
    s.additionalProperties = false;
  }
  return s;
}

function formatSchema(r) {
  return { type: "string", format: r.pick(FORMATS) };
}

function patternSchema(r) {
  return { type: "string", pattern: r.pick(PATTERNS) };
}

function arraySchema(r, depth) {
  const s = { type: "array", items: depth < 3 && r.chance(0.3) ? objectSchema(r, depth + 1, 1, 3) : leaf(r) };
  s.maxItems = r.int(0, 4);
  if (r.chance(0.6)) s.minItems = r.int(0, s.maxItems);
  return s;
}

function prefixItemsSchema(r) {
  const prefix = Array.from({ length: r.int(1, 3) }, () => leaf(r));
  const s = { type: "array", prefixItems: prefix };
  if (r.chance(0.6)) {
    s.items = false;
  } else {
    s.items = primitive(r);  // items after the prefix, bounded by maxItems
    s.maxItems = prefix.length + r.int(0, 2);
  }
  if (r.chance(0.6)) s.minItems = r.int(0, prefix.length);
  return s;
}

function objectOrPrimitive(r, depth) {
  return depth < 3 && r.chance(0.5) ? objectSchema(r, depth + 1, 1, 3) : primitive(r);
}

function anyOfSchema(r, depth) {
  return { anyOf: Array.from({ length: r.int(2, 3) }, () => objectOrPrimitive(r, depth)) };
}

// oneOf whose branches have different JSON types, so exactly one matches.
function oneOfSchema(r, depth) {
  const makers = {
    string: () => stringSchema(r),
    integer: () => integerSchema(r),
    boolean: () => ({ type: "boolean" }),
    null: () => ({ type: "null" }),
    object: () => (depth < 3 ? objectSchema(r, depth + 1, 1, 2) : { type: "null" }),
    array: () => ({ type: "array", items: primitive(r), maxItems: r.int(0, 3) }),
  };
  const types = r.some(Object.keys(makers), 2, 3);
  if (depth >= 3 && types.includes("object") && types.includes("null")) types.splice(types.indexOf("object"), 1);
  if (types.length < 2) types.push("boolean" === types[0] ? "string" : "boolean");
  return { oneOf: types.map(t => makers[t]()) };
}

// Values deep in the tree: primitives mostly, the other leaf-like kinds sometimes.
function leaf(r) {
  const u = r.next();
  if (u < 0.7) return primitive(r);
  if (u < 0.8) return enumSchema(r);
  if (u < 0.85) return constSchema(r);
  if (u < 0.93) return typeListSchema(r);
  if (u < 0.97) return formatSchema(r);
  return patternSchema(r);
}

function anyValue(r, depth) {
  const u = r.next();
  if (depth < 3 && u < 0.12) return objectSchema(r, depth + 1, 1, 3);
  if (depth < 3 && u < 0.22) return arraySchema(r, depth + 1);
  return leaf(r);
}

function pickKeys(r, n) {
  const keys = r.some(KEYS, n, n);
  if (r.chance(0.08)) keys[0] = r.pick(ODD_KEYS);
  return keys;
}

// An object at nesting depth `depth` (the root object is depth 1).
function objectSchema(r, depth, lo, hi, focus) {
  const focusN = focus ? r.int(1, 2) : 0;
  const n = Math.max(focusN, r.int(lo, hi));
  const keys = pickKeys(r, n);
  const properties = {};
  keys.forEach((k, i) => { properties[k] = i < focusN ? focus(r, depth) : anyValue(r, depth); });
  const s = { type: "object", properties: {} };
  for (const k of r.shuffle(keys)) s.properties[k] = properties[k];
  const required = keys.filter(() => r.chance(0.65));
  if (required.length || r.chance(0.5)) s.required = required;
  // Closed: an open object admits further members with keys and values of
  // any length, and this model never writes the '}' that would end them.
  s.additionalProperties = false;
  return s;
}

function nestedFocus(r, depth) {
  if (depth >= 3) return primitive(r);
  return objectSchema(r, depth + 1, 1, 3, depth + 1 < 3 && r.chance(0.7) ? nestedFocus : null);
}

// $defs at the root; properties point at them, one def sometimes at another.
function withDefs(r) {
  const names = r.some(["Point", "Name", "Color", "Tag", "Item", "Level"], 1, 3);
  const defs = {};
  for (const [i, name] of names.entries()) {
    if (i > 0 && r.chance(0.4)) {
      defs[name] = { type: "array", items: { $ref: `#/$defs/${names[0]}` }, maxItems: r.int(1, 3) };
    } else {
      defs[name] = r.chance(0.5) ? objectSchema(r, 2, 1, 3) : leaf(r);
    }
  }
  const s = objectSchema(r, 1, 1, 3, () => ({ $ref: `#/$defs/${r.pick(names)}` }));
  s.$defs = defs;
  return s;
}

// A tree of nodes through $ref. Self-recursive with at most one or two
// children, or depth-bounded by a chain of defs whose last has no children.
function treeSchema(r) {
  const value = { type: "integer", minimum: 0, maximum: 9 };
  const defs = {};
  let top;
  if (r.chance(0.5)) {
    defs.node = {
      type: "object",
      properties: { v: value, kids: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: r.int(1, 2) } },
      required: ["v", "kids"], additionalProperties: false,
    };
    top = "node";
  } else {
    const levels = r.int(1, 3);
    for (let l = 0; l <= levels; l++) {
      defs[`level${l}`] = {
        type: "object",
        properties: l === 0
          ? { v: value }
          : { v: value, kids: { type: "array", items: { $ref: `#/$defs/level${l - 1}` }, maxItems: r.int(1, 2) } },
        required: l === 0 ? ["v"] : ["v", "kids"], additionalProperties: false,
      };
    }
    top = `level${levels}`;
  }
  if (r.chance(0.5)) return { $defs: defs, $ref: `#/$defs/${top}` };
  const s = objectSchema(r, 1, 1, 2, () => ({ $ref: `#/$defs/${top}` }));
  s.$defs = defs;
  return s;
}

function numbersFocus(r) {
  return r.pick([integerSchema, integerSchema, () => ({ type: "number" }), () => ({ type: "boolean" })])(r);
}

// Category i % CATEGORIES.length of schema i; `root` (when given) returns a
// schema that is not an object at the top, used for some of the schemas.
const CATEGORIES = [
  { name: "object", make: r => objectSchema(r, 1, 1, 5, primitive) },
  { name: "nested", make: r => objectSchema(r, 1, 1, 3, nestedFocus) },
  { name: "array", make: r => objectSchema(r, 1, 1, 3, (r, d) => arraySchema(r, d + 1)), root: r => arraySchema(r, 1) },
  { name: "prefixItems", make: r => objectSchema(r, 1, 1, 3, prefixItemsSchema), root: prefixItemsSchema },
  { name: "enum", make: r => objectSchema(r, 1, 1, 4, enumSchema), root: enumSchema },
  { name: "const", make: r => objectSchema(r, 1, 1, 4, constSchema), root: constSchema },
  { name: "anyOf", make: r => objectSchema(r, 1, 1, 3, anyOfSchema), root: r => anyOfSchema(r, 1) },
  { name: "oneOf", make: r => objectSchema(r, 1, 1, 3, oneOfSchema), root: r => oneOfSchema(r, 1) },
  { name: "$ref", make: withDefs },
  { name: "tree", make: treeSchema },
  { name: "type list", make: r => objectSchema(r, 1, 1, 4, typeListSchema), root: typeListSchema },
  { name: "format", make: r => objectSchema(r, 1, 1, 3, formatSchema) },
  { name: "pattern", make: r => objectSchema(r, 1, 1, 3, patternSchema) },
  { name: "numbers", make: r => objectSchema(r, 1, 2, 5, numbersFocus) },
];

// A rough bound on the characters of a document valid for `s` (unbounded
// strings and arrays counted at a typical length) to keep outputs far below
// max_tokens.
export function size(s, defs, depth = 0) {
  if (s === true || s === false || s === undefined) return 8;
  if (s.$ref) return depth > 6 ? 20 : size(defs[s.$ref.split("/").pop()], defs, depth + 1);
  if ("const" in s) return JSON.stringify(s.const).length;
  if (s.enum) return Math.max(...s.enum.map(v => JSON.stringify(v).length));
  if (s.anyOf || s.oneOf) return Math.max(...(s.anyOf || s.oneOf).map(b => size(b, defs, depth)));
  if (s.format || s.pattern) return 40;
  const types = [].concat(s.type);
  return Math.max(...types.map(t => {
    switch (t) {
      case "string": return 2 + (s.maxLength ?? 30);
      case "integer": case "boolean": case "null": return 6;
      case "number": return 24;
      case "array": return 2 + (s.prefixItems || []).reduce((n, p) => n + 1 + size(p, defs, depth), 0) +
        Math.max(0, (s.maxItems ?? 4) - (s.prefixItems || []).length) * (1 + size(s.items, defs, depth));
      case "object": return 2 + Object.entries(s.properties || {}).reduce(
        (n, [k, v]) => n + k.length + 5 + size(v, defs, depth), 0);
      default: return 8;
    }
  }));
}

export function makeSchema(i) {
  const r = rng((i + 1) * 0x9e3779b1);
  const cat = CATEGORIES[i % CATEGORIES.length];
  for (;;) {
    const s = cat.root && r.chance(0.15) ? cat.root(r) : cat.make(r);
    // Annotations the compiler must ignore.
    if (r.chance(0.1)) s.$schema = "https://json-schema.org/draft/2020-12/schema";
    if (r.chance(0.1)) s.description = "generated";
    if (size(s, s.$defs || {}) <= 600) return { category: cat.name, schema: s };
  }
}
