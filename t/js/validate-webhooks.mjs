// Validates captured webhook deliveries (bodies and headers, as a receiver
// got them) with Ajv against the `webhooks` section of an OpenAPI document,
// as a receiver that generates its validation from our document would.
//
//   node t/js/validate-webhooks.mjs OPENAPI.json DELIVERIES.json
//
// DELIVERIES.json: [{"name", "headers": {lower-case name: value},
//                    "body_b64", "synthetic"?: true}, ...]
//
// Each delivery is matched to webhooks[X-Service-Event-Type].post and
// checked with Ajv (JSON Schema draft 2020-12, the dialect of OpenAPI 3.1;
// ajv-formats; strict mode, with OpenAPI's own schema keywords declared):
// - the body against the entry's request body schema, as the document
//   says it;
// - the body again with every object schema of the document closed
//   (`unevaluatedProperties: false` added where the document does not say
//   otherwise), so a member the server sends and the document does not
//   describe is reported too;
// - the Content-Type against the entry's request body media types;
// - every header parameter of the entry: present when required, and its
//   value against its schema;
// - no header of the service's own families (X-Service-*, webhook-*,
//   traceparent, tracestate) that the entry does not document;
// - X-Service-Event-Id / -Event-Type equal to the body's id / type.
// A synthetic event (`revopsctl event emit`, test traffic) carries data
// {"synthetic": true, "n": i} instead of its type's data: its data must be
// exactly that, and the body is validated with `data` replaced by the
// entry's documented example data, so that everything the server itself
// makes (envelope, properties, headers) is still checked.
//
// Prints one JSON line per delivery ({"index", "name", "type", "ok",
// "errors"}) and a summary line ({"total", "valid", "invalid",
// "documented": [types], "seen": {type: {"v1": n, "v2": n}}}); exits 0 only
// when every delivery is valid, 1 otherwise, 2 on bad usage.
// Packages come from tools/npm/node_modules; REVOPS_NPM_DIR overrides it.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.REVOPS_NPM_DIR || path.resolve(here, "..", "..", "tools", "npm");
const require = createRequire(path.join(npmDir, "package.json"));
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;

const [docFile, deliveriesFile] = process.argv.slice(2);
if (!deliveriesFile) {
  process.stderr.write("usage: validate-webhooks.mjs OPENAPI.json DELIVERIES.json\n");
  process.exit(2);
}
let doc, deliveries;
try {
  doc = JSON.parse(readFileSync(docFile, "utf8"));
  deliveries = JSON.parse(readFileSync(deliveriesFile, "utf8"));
} catch (e) {
  process.stderr.write(`cannot read the input: ${e.message}\n`);
  process.exit(2);
}
if (!doc.webhooks || !Array.isArray(deliveries)) {
  process.stderr.write("expected an OpenAPI document with `webhooks` and an array of deliveries\n");
  process.exit(2);
}

// OpenAPI 3.1's base vocabulary adds these keywords to JSON Schema; strict
// mode refuses any other unknown keyword (a typo in the document fails).
const OAS_KEYWORDS = ["example", "discriminator", "xml", "externalDocs"];
// Ajv compiles the resource a $ref points into, so the schemas are loaded
// as one resource holding just the document's `components` and `webhooks`
// (the references stay `#/components/...`); those two names are declared
// as annotations so that strict mode accepts that container's root.
const CONTAINER_KEYWORDS = ["components", "webhooks"];
function makeAjv(document) {
  const ajv = new Ajv2020({ strict: true, allErrors: true, strictTypes: true,
                            allowUnionTypes: true });
  ajv.addVocabulary([...OAS_KEYWORDS, ...CONTAINER_KEYWORDS]);
  addFormats(ajv);
  ajv.addSchema({ components: document.components, webhooks: document.webhooks },
                "openapi.json");
  return ajv;
}

// The document with every object schema closed: a schema that lists
// `properties` and says nothing about others gets
// `unevaluatedProperties: false` (which, unlike additionalProperties, sees
// the members that sibling allOf/$ref subschemas evaluate). Only schemas
// under components.schemas that are not themselves an allOf part are
// closed, so that an allOf of a base and an extension still works; an
// allOf without a type (an event: envelope + its data) is an object.
function closed(document) {
  const copy = structuredClone(document);
  const visit = (schema, isAllOfPart) => {
    if (!schema || typeof schema !== "object" || Array.isArray(schema)) return;
    const objectLike = schema.type === "object" ||
      (schema.type === undefined && schema.allOf && !schema.properties);
    if (!isAllOfPart && objectLike && (schema.properties || schema.allOf) &&
        !("additionalProperties" in schema) && !("unevaluatedProperties" in schema) &&
        !("patternProperties" in schema)) {
      schema.type = "object"; // an allOf of object schemas (strictTypes wants it said)
      schema.unevaluatedProperties = false;
    }
    for (const [k, v] of Object.entries(schema.properties ?? {})) visit(v, false);
    if (schema.items) visit(schema.items, false);
    for (const part of schema.allOf ?? []) visit(part, true);
    for (const part of [...(schema.oneOf ?? []), ...(schema.anyOf ?? [])]) visit(part, false);
  };
  for (const schema of Object.values(copy.components?.schemas ?? {})) visit(schema, false);
  return copy;
}

const ajv = makeAjv(doc);
const ajvClosed = makeAjv(closed(doc));

const escape = (s) => s.replace(/~/g, "~0").replace(/\//g, "~1");
function resolve(ref) {
  if (!ref.startsWith("#/")) throw new Error(`external reference ${ref}`);
  let node = doc;
  for (const part of ref.slice(2).split("/")) {
    node = node?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  if (node === undefined) throw new Error(`dangling reference ${ref}`);
  return node;
}

// Per event type: validators for the body (as documented and closed), the
// media types, the header parameters and the example data.
const entries = new Map();
function entry(type) {
  if (entries.has(type)) return entries.get(type);
  let e = null;
  const op = doc.webhooks[type]?.post;
  if (op) {
    const content = op.requestBody?.content ?? {};
    const mediaTypes = Object.keys(content);
    const json = content["application/json"];
    const pointer = `openapi.json#/webhooks/${escape(type)}/post/requestBody/content/` +
                    `${escape("application/json")}/schema`;
    const headers = [];
    (op.parameters ?? []).forEach((p, i) => {
      const ptr = p.$ref ? p.$ref.slice(1) : `/webhooks/${escape(type)}/post/parameters/${i}`;
      const param = p.$ref ? resolve(p.$ref) : p;
      if (param.in !== "header") return;
      headers.push({ name: param.name.toLowerCase(), required: param.required === true,
                     validate: ajv.compile({ $ref: `openapi.json#${ptr}/schema` }) });
    });
    const example = json?.example ?? Object.values(json?.examples ?? {})[0]?.value;
    e = { mediaTypes, headers, example,
          body: json ? ajv.compile({ $ref: pointer }) : null,
          bodyClosed: json ? ajvClosed.compile({ $ref: pointer }) : null };
  }
  entries.set(type, e);
  return e;
}

const FAMILIES = [/^x-service-/, /^webhook-/, /^traceparent$/, /^tracestate$/];
const fmt = (where, errs) => (errs ?? []).map((x) =>
  `${where}${x.instancePath || ""} ${x.message}` +
  (x.params && Object.keys(x.params).length ? " " + JSON.stringify(x.params) : ""));

let invalid = 0;
const seen = {};
deliveries.forEach((d, index) => {
  const errors = [];
  const headers = Object.fromEntries(Object.entries(d.headers ?? {})
    .map(([k, v]) => [k.toLowerCase(), v]));
  const type = headers["x-service-event-type"] ?? null;
  let body = null;
  try {
    body = JSON.parse(Buffer.from(d.body_b64 ?? "", "base64").toString("utf8"));
  } catch (err) {
    errors.push(`body is not JSON: ${err.message}`);
  }
  const e = type === null ? null : entry(type);
  if (type === null) errors.push("no X-Service-Event-Type header");
  else if (!e) errors.push(`event type ${type} has no entry in the document's webhooks`);
  if (e && body !== null) {
    let checked = body;
    if (d.synthetic) {
      const data = body?.data;
      if (!(data && Object.keys(data).length === 2 && data.synthetic === true &&
            Number.isInteger(data.n) && data.n >= 0)) {
        errors.push(`synthetic event data is not {"synthetic": true, "n": i}: ${JSON.stringify(data)}`);
      }
      if (!e.example?.data) errors.push(`the ${type} entry has no example data`);
      checked = { ...body, data: structuredClone(e.example?.data) };
    }
    if (!e.body) {
      errors.push(`the ${type} entry has no application/json request body`);
    } else if (!e.body(checked)) {
      errors.push(...fmt("body", e.body.errors));
    } else if (!e.bodyClosed(checked)) {
      errors.push(...fmt("body (undocumented member)", e.bodyClosed.errors
        .filter((x) => x.keyword === "unevaluatedProperties")));
      if (!errors.length) errors.push(...fmt("body (closed)", e.bodyClosed.errors));
    }
    const ctype = (headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
    if (!e.mediaTypes.includes(ctype)) {
      errors.push(`Content-Type ${JSON.stringify(headers["content-type"] ?? null)} is not one of ` +
                  JSON.stringify(e.mediaTypes));
    }
    for (const h of e.headers) {
      if (!(h.name in headers)) {
        if (h.required) errors.push(`required header ${h.name} missing`);
      } else if (!h.validate(headers[h.name])) {
        errors.push(...fmt(`header ${h.name}`, h.validate.errors));
      }
    }
    const documented = new Set(e.headers.map((h) => h.name));
    for (const name of Object.keys(headers)) {
      if (FAMILIES.some((re) => re.test(name)) && !documented.has(name)) {
        errors.push(`header ${name} is sent but not documented for ${type}`);
      }
    }
    if (headers["x-service-event-id"] !== body?.id) {
      errors.push(`X-Service-Event-Id ${headers["x-service-event-id"]} is not the body's id ${body?.id}`);
    }
    if (type !== body?.type) errors.push(`X-Service-Event-Type ${type} is not the body's type ${body?.type}`);
  }
  if (errors.length) invalid++;
  else if (type) {
    const surface = body && "portfolio_id" in body ? "v2" : "v1";
    seen[type] ??= { v1: 0, v2: 0 };
    seen[type][surface]++;
  }
  process.stdout.write(JSON.stringify({ index, name: d.name ?? null, type,
                                        synthetic: !!d.synthetic, ok: !errors.length,
                                        errors }) + "\n");
});
process.stdout.write(JSON.stringify({ total: deliveries.length, valid: deliveries.length - invalid,
                                      invalid, documented: Object.keys(doc.webhooks).sort(),
                                      seen }) + "\n");
process.exit(invalid ? 1 : 0);
