// Verifies captured webhook deliveries with the real `standardwebhooks` npm
// package (pinned in tools/npm/package.json), as a receiver would.
//
//   node t/js/verify-standardwebhooks.mjs DELIVERIES.json [SECRET]
//
// DELIVERIES.json: [{"headers": {name: value, ...}, "body_b64": "...",
//                    "secret"?: "whsec_...", "name"?: "..."}, ...]
// Each delivery is checked with `new Webhook(secret).verify(body, headers)`;
// an entry's own "secret" overrides the one on the command line.  The body
// is handed to the library as the raw bytes received (a Buffer).
//
// Prints one JSON line per delivery ({"index", "name", "ok", "error",
// "webhook_id", "payload_id"}) and a summary line; exits 0 only when every
// delivery verifies, 1 when any is rejected, 2 on bad usage.
// The package is loaded from tools/npm/node_modules (scripts/npm-tools.sh
// installs it); REVOPS_NPM_DIR overrides that directory.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.REVOPS_NPM_DIR || path.resolve(here, "..", "..", "tools", "npm");
const require = createRequire(path.join(npmDir, "package.json"));
const { Webhook, WebhookVerificationError } = require("standardwebhooks");

const [file, defaultSecret] = process.argv.slice(2);
if (!file) {
  process.stderr.write("usage: verify-standardwebhooks.mjs DELIVERIES.json [SECRET]\n");
  process.exit(2);
}

let deliveries;
try {
  deliveries = JSON.parse(readFileSync(file, "utf8"));
} catch (e) {
  process.stderr.write(`cannot read ${file}: ${e.message}\n`);
  process.exit(2);
}
if (!Array.isArray(deliveries)) {
  process.stderr.write(`${file}: expected a JSON array of deliveries\n`);
  process.exit(2);
}

let failed = 0;
deliveries.forEach((d, index) => {
  const result = { index, name: d.name ?? null, ok: false, error: null,
                   webhook_id: null, payload_id: null };
  try {
    const secret = d.secret ?? defaultSecret;
    if (typeof secret !== "string") throw new Error("no secret for this delivery");
    const headers = d.headers ?? {};
    result.webhook_id = headers["webhook-id"] ?? null;
    const body = Buffer.from(d.body_b64 ?? "", "base64");
    const payload = new Webhook(secret).verify(body, headers);
    result.ok = true;
    result.payload_id = payload && typeof payload === "object" ? payload.id ?? null : null;
  } catch (e) {
    result.error = (e instanceof WebhookVerificationError ? "WebhookVerificationError: " : "")
      + e.message;
    failed++;
  }
  process.stdout.write(JSON.stringify(result) + "\n");
});
process.stdout.write(JSON.stringify({ total: deliveries.length, verified: deliveries.length - failed,
                                      rejected: failed }) + "\n");
process.exit(failed ? 1 : 0);
