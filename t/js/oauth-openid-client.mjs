// Drives a live revopsd with the pinned openid-client (tools/npm), as a
// client developer following docs/api-guide.md ("Authorization server
// metadata") would: RFC 8414 discovery, the client-credentials grant with
// client_secret_basic and with client_secret_post, the token used on a v2
// call, and a wrong secret with each method.
//
//   node t/js/oauth-openid-client.mjs BASE_URL CLIENT_ID CLIENT_SECRET PORTFOLIO_ID
//
// Prints one JSON line per check ({"check", "ok", ...facts}) and a summary
// line {"checks", "failed"}; exits 0 only when every check passed, 1 when
// any failed, 2 on bad usage. The facts are what the library reported, so
// the Python suite (t/api/identity/test_oauth_openid_client.py) can assert
// on them too. REVOPS_NPM_DIR overrides tools/npm.

import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.REVOPS_NPM_DIR || path.resolve(here, "..", "..", "tools", "npm");
const require = createRequire(path.join(npmDir, "package.json"));
const client = await import(pathToFileURL(require.resolve("openid-client")).href);

const [baseUrl, clientId, clientSecret, portfolioId] = process.argv.slice(2);
if (!portfolioId) {
  process.stderr.write("usage: oauth-openid-client.mjs BASE_URL CLIENT_ID CLIENT_SECRET PORTFOLIO_ID\n");
  process.exit(2);
}

let failed = 0, checks = 0;
function report(check, ok, facts = {}) {
  checks++;
  if (!ok) failed++;
  process.stdout.write(JSON.stringify({ check, ok, ...facts }) + "\n");
}
function describe(err) {
  return { error_class: err?.constructor?.name ?? typeof err, message: String(err?.message ?? err),
           code: err?.code ?? null, status: err?.status ?? null };
}

// The example of docs/api-guide.md, as it is written there (only the
// variables differ): discovery with RFC 8414 metadata over loopback http.
async function discover(auth) {
  return client.discovery(new URL(baseUrl), clientId, undefined, auth,
    { algorithm: "oauth2", execute: [client.allowInsecureRequests] }); // http only
}

// 1. discovery, then the grant, with each client authentication method
const methods = [["client_secret_basic", client.ClientSecretBasic],
                 ["client_secret_post", client.ClientSecretPost]];
for (const [method, Auth] of methods) {
  let config;
  try {
    config = await discover(Auth(clientSecret));
    const md = config.serverMetadata();
    report(`discovery ${method}`, md.issuer === baseUrl &&
             md.token_endpoint === baseUrl + "/oauth/token" &&
             md.token_endpoint_auth_methods_supported.includes(method),
           { issuer: md.issuer, token_endpoint: md.token_endpoint,
             token_endpoint_auth_methods_supported: md.token_endpoint_auth_methods_supported,
             grant_types_supported: md.grant_types_supported });
  } catch (err) {
    report(`discovery ${method}`, false, describe(err));
    continue;
  }
  try {
    const tokens = await client.clientCredentialsGrant(config, { scope: "portfolios:read" });
    report(`grant ${method}`, typeof tokens.access_token === "string" &&
             tokens.token_type === "bearer" && tokens.scope === "portfolios:read" &&
             tokens.expiresIn() > 0,
           { token_type: tokens.token_type, scope: tokens.scope, expires_in: tokens.expires_in,
             portfolio_id: tokens.portfolio_id ?? null });
    // the token works on a v2 call (the library adds the Bearer header)
    const res = await client.fetchProtectedResource(config, tokens.access_token,
      new URL(baseUrl + "/v2/portfolios"), "GET", undefined,
      new Headers({ "X-Service-Portfolio": portfolioId }));
    const body = await res.json();
    const ids = Array.isArray(body?.data) ? body.data.map((p) => p.id) : null;
    report(`v2 call ${method}`, res.status === 200 && ids?.length === 1 && ids[0] === portfolioId,
           { status: res.status, portfolio_ids: ids });
  } catch (err) {
    report(`grant ${method}`, false, describe(err));
  }
}

// 2. a wrong secret. With the Authorization header (client_secret_basic) the
// server answers 401 invalid_client with `WWW-Authenticate: Basic`, which
// openid-client reports as a challenge (the body still says invalid_client);
// with the secret in the body (client_secret_post) it answers 400
// invalid_client without a challenge, which the library reports as the
// OAuth error itself (RFC 6749 §5.2).
for (const [method, Auth] of methods) {
  try {
    const config = await discover(Auth(clientSecret + "-wrong"));
    const tokens = await client.clientCredentialsGrant(config, { scope: "portfolios:read" });
    report(`wrong secret ${method}`, false, { unexpected: "a token", scope: tokens.scope });
  } catch (err) {
    const facts = describe(err);
    if (err instanceof client.WWWAuthenticateChallengeError) {
      facts.challenges = err.cause;
      const res = err.response;
      facts.body_error = res ? (await res.json()).error : null;
    } else if (err instanceof client.ResponseBodyError) {
      facts.oauth_error = err.error;
      facts.www_authenticate = err.response?.headers.get("www-authenticate") ?? null;
    }
    const ok = method === "client_secret_basic"
      ? err instanceof client.WWWAuthenticateChallengeError && facts.status === 401 &&
        facts.challenges?.length === 1 && facts.challenges[0].scheme === "basic" &&
        facts.body_error === "invalid_client"
      : err instanceof client.ResponseBodyError && facts.status === 400 &&
        facts.oauth_error === "invalid_client" && facts.www_authenticate === null;
    report(`wrong secret ${method}`, ok, facts);
  }
}

process.stdout.write(JSON.stringify({ checks, failed }) + "\n");
process.exit(failed ? 1 : 0);
