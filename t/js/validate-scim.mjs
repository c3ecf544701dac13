// Validates SCIM resources a live revopsd returned with SCIMMY (pinned in
// tools/npm), a third-party implementation of RFC 7643's schemas.
//
//   node t/js/validate-scim.mjs CAPTURED.json
//
// CAPTURED.json: [{"name", "kind", "body"}, ...], kind one of
//   "User", "Group"          a resource as returned (GET, POST, PUT, PATCH)
//   "UserList", "GroupList"  a ListResponse of them
//   "ResourceType"           one resource type; "ResourceTypeList" a list
//   "ServiceProviderConfig"  the configuration
//   "Schema"                 one schema definition; "SchemaList" a list
// Checks:
// - User (with SCIMMY's enterprise extension declared), Group,
//   ResourceType and ServiceProviderConfig: `new SCIMMY.Schemas.X(body,
//   "out")` must not throw (types, required attributes, multi-valued or
//   not, canonical values, the schemas list), and every attribute SCIMMY
//   knows must come out as the server sent it (so an attribute SCIMMY had
//   to coerce, e.g. a boolean sent as a string, is reported);
// - lists: `new SCIMMY.Messages.ListResponse(body)` must accept the
//   message (schemas, integers), then every resource as above;
// - Schema: the definition the server publishes against SCIMMY's own
//   RFC 7643 definition of that schema (`definition.describe()`): every
//   attribute, sub-attribute and characteristic (type, multiValued,
//   required, caseExact, mutability, returned, uniqueness, canonical
//   values, referenceTypes) must agree, except those in EXCEPTIONS below,
//   each with its reason.
// Prints one JSON line per item ({"index", "name", "kind", "ok", "errors"})
// and a summary line; exits 0 only when all pass, 1 otherwise, 2 on bad
// usage. Packages come from tools/npm/node_modules; REVOPS_NPM_DIR
// overrides that directory.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.REVOPS_NPM_DIR || path.resolve(here, "..", "..", "tools", "npm");
const require = createRequire(path.join(npmDir, "package.json"));
const { default: SCIMMY } = await import(pathToFileURL(require.resolve("scimmy")).href);

const [file] = process.argv.slice(2);
if (!file) {
  process.stderr.write("usage: validate-scim.mjs CAPTURED.json\n");
  process.exit(2);
}
let items;
try {
  items = JSON.parse(readFileSync(file, "utf8"));
} catch (e) {
  process.stderr.write(`cannot read ${file}: ${e.message}\n`);
  process.exit(2);
}

const { Schemas, Messages } = SCIMMY;
Schemas.User.extend(Schemas.EnterpriseUser);
const CLASSES = { User: Schemas.User, Group: Schemas.Group, ResourceType: Schemas.ResourceType,
                  ServiceProviderConfig: Schemas.ServiceProviderConfig };
const DEFINITIONS = { [Schemas.User.id]: Schemas.User, [Schemas.Group.id]: Schemas.Group,
                      [Schemas.EnterpriseUser.id]: Schemas.EnterpriseUser };

// Where the published schemas differ from SCIMMY's RFC 7643 definitions
// on purpose: "<schema urn>:<attribute path>.<characteristic>" -> reason.
// docs/scim.md ("Checked with SCIMMY") lists them too.
const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const EXCEPTIONS = {
  // A user's groups are always groups of the portfolio, never users.
  [`${USER}:groups.$ref.referenceTypes`]: "narrowed to Group: a user's groups are groups",
  // Groups do not nest in revops, so membership is never "indirect".
  [`${USER}:groups.type.canonicalValues`]: "narrowed to direct: groups do not nest",
  // RFC 7643 §4.1.2 leaves role values open; revops names its three roles.
  [`${USER}:roles.value.canonicalValues`]: "the three revops roles (RFC 7643 leaves roles open)",
  // Not fixed yet: RFC 7643 §8.7.1 types the value binary (base64) and
  // caseExact. revops stores what it is sent and its filters compare the
  // value case-insensitively; publishing binary would start refusing
  // values that are not base64 (a behaviour change to make on purpose).
  [`${USER}:x509Certificates.value.type`]: "string, not binary: stored as sent (to be decided)",
  [`${USER}:x509Certificates.value.caseExact`]: "filters compare it case-insensitively (to be decided)",
};

// Compares what SCIMMY made of a resource with what the server sent: every
// attribute SCIMMY knows (it drops the ones it does not) must be unchanged.
function compare(sent, made, where, errors) {
  if (made === null || typeof made !== "object") {
    if (!isDeepStrictEqual(sent, made)) {
      errors.push(`${where}: sent ${JSON.stringify(sent)}, SCIMMY made ${JSON.stringify(made)}`);
    }
    return;
  }
  if (Array.isArray(made)) {
    if (!Array.isArray(sent) || sent.length !== made.length) {
      errors.push(`${where}: sent ${JSON.stringify(sent)}, SCIMMY made ${JSON.stringify(made)}`);
      return;
    }
    made.forEach((m, i) => compare(sent[i], m, `${where}[${i}]`, errors));
    return;
  }
  if (sent === null || typeof sent !== "object" || Array.isArray(sent)) {
    errors.push(`${where}: sent ${JSON.stringify(sent)}, SCIMMY made an object`);
    return;
  }
  const byLower = Object.fromEntries(Object.entries(sent).map(([k, v]) => [k.toLowerCase(), [k, v]]));
  for (const [k, v] of Object.entries(made)) {
    const s = byLower[k.toLowerCase()];
    if (!s) {
      // SCIMMY fills meta.resourceType / schemas itself; anything else is new
      errors.push(`${where}.${k}: not sent, SCIMMY made ${JSON.stringify(v)}`);
      continue;
    }
    compare(s[1], v, `${where}.${s[0]}`, errors);
  }
}

function resource(kind, body, errors, where = kind) {
  const Class = CLASSES[kind];
  let made;
  try {
    // User and Group take (resource, direction); ResourceType and
    // ServiceProviderConfig (resource, basepath) and are outbound only
    const instance = kind === "User" || kind === "Group" ? new Class(body, "out")
      : new Class(body, body?.meta?.location?.replace(/\/(User|Group)$/, ""));
    made = JSON.parse(JSON.stringify(instance));
  } catch (e) {
    errors.push(`${where}: SCIMMY refused it: ${e.constructor.name}: ${e.message}`);
    return;
  }
  compare(body, made, where, errors);
}

function list(kind, body, errors) {
  try {
    new Messages.ListResponse(body);
  } catch (e) {
    errors.push(`ListResponse refused: ${e.constructor.name}: ${e.message}`);
  }
  (body?.Resources ?? []).forEach((r, i) => resource(kind, r, errors, `Resources[${i}]`));
}

const DEFAULTS = { type: "string", multiValued: false, required: false, caseExact: false,
                   mutability: "readWrite", returned: "default", uniqueness: "none" };
const CHARACTERISTICS = ["type", "multiValued", "required", "caseExact", "mutability", "returned",
                         "uniqueness", "canonicalValues", "referenceTypes"];
function compareAttributes(urn, published, rfc, prefix, errors) {
  const pub = new Map((published ?? []).map((a) => [a.name.toLowerCase(), a]));
  const ref = new Map((rfc ?? []).map((a) => [a.name.toLowerCase(), a]));
  for (const [key, r] of ref) {
    const p = pub.get(key);
    const at = prefix + r.name;
    if (!p) {
      if (!(`${urn}:${at}` in EXCEPTIONS)) errors.push(`${urn}: attribute ${at} is not published`);
      continue;
    }
    if (p.name !== r.name) errors.push(`${urn}: attribute ${at} is published as ${p.name}`);
    for (const c of CHARACTERISTICS) {
      // RFC 7643 §2.2's defaults stand for an omitted characteristic
      const norm = (v) => (Array.isArray(v) ? (v.length ? [...v].sort() : undefined)
                                            : v ?? DEFAULTS[c]);
      const want = norm(r[c]), got = norm(p[c]);
      if (!isDeepStrictEqual(want, got) && !(`${urn}:${at}.${c}` in EXCEPTIONS)) {
        errors.push(`${urn}: ${at}.${c} is ${JSON.stringify(p[c])}, RFC 7643 (SCIMMY) says ` +
                    JSON.stringify(r[c]));
      }
    }
    if (r.subAttributes || p.subAttributes) {
      compareAttributes(urn, p.subAttributes, r.subAttributes, at + ".", errors);
    }
  }
  for (const [key, p] of pub) {
    if (!ref.has(key) && !(`${urn}:${prefix}${p.name}` in EXCEPTIONS)) {
      errors.push(`${urn}: attribute ${prefix}${p.name} is not in RFC 7643`);
    }
  }
}

function schema(body, errors) {
  const Class = DEFINITIONS[body?.id];
  if (!Class) {
    errors.push(`schema ${body?.id}: not one SCIMMY defines`);
    return;
  }
  // describe() holds Attribute instances; their JSON form is the definition
  const rfc = JSON.parse(JSON.stringify(Class.definition.describe()));
  if (body.name !== rfc.name) errors.push(`${body.id}: name ${body.name}, RFC 7643 says ${rfc.name}`);
  compareAttributes(body.id, body.attributes, rfc.attributes.filter((a) => !a.$ref),
                    "", errors);
}

let failed = 0;
const counts = {};
items.forEach((item, index) => {
  const errors = [];
  const { kind, body } = item;
  counts[kind] = (counts[kind] ?? 0) + 1;
  if (kind in CLASSES) resource(kind, body, errors);
  else if (kind === "UserList") list("User", body, errors);
  else if (kind === "GroupList") list("Group", body, errors);
  else if (kind === "ResourceTypeList") list("ResourceType", body, errors);
  else if (kind === "Schema") schema(body, errors);
  else if (kind === "SchemaList") {
    try {
      new Messages.ListResponse(body);
    } catch (e) {
      errors.push(`ListResponse refused: ${e.constructor.name}: ${e.message}`);
    }
    (body?.Resources ?? []).forEach((r) => schema(r, errors));
  } else errors.push(`unknown kind ${kind}`);
  if (errors.length) failed++;
  process.stdout.write(JSON.stringify({ index, name: item.name ?? null, kind, ok: !errors.length,
                                        errors }) + "\n");
});
process.stdout.write(JSON.stringify({ total: items.length, passed: items.length - failed, failed,
                                      counts }) + "\n");
process.exit(failed ? 1 : 0);
