#include "api/identity/oauth.h"

#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/ctx.h"
#include "api/identity/user_event.h"
#include "api/respond.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/form.h"
#include "core/validate.h"
#include "identity/directory.h"
#include "identity/idp.h"
#include "identity/saml.h"
#include "portfolio/portfolio.h"
#include "store/store.h"

#define SECRET_MAX 256

/* An RFC 6749 §5.2 error: 400, except invalid_client for a request that
 * carried an Authorization header, which §5.2 requires to be 401 with a
 * challenge for the scheme the client used (Basic, the only one the token
 * endpoint takes). A client that authenticated in the body, or not at
 * all, gets 400 invalid_client without a challenge: a 401 must carry one
 * (RFC 9110 §15.5.2), and a Basic challenge would tell a client_secret_post
 * client to switch schemes instead of reporting its bad secret. */
static void oauth_error(struct ctx *c, const char *error, const char *desc)
{
	int status = 400;

	if (!strcmp(error, "invalid_client") && http_header(c->req, "Authorization")) {
		status = 401;
		if (response_header(c->res, "WWW-Authenticate", "Basic realm=\"revops\"") < 0)
			status = 500;
	}
	c->error_code = error;
	respond_raw_json(c, status,
			 json_pack("{s:s, s:s}", "error", error, "error_description", desc));
}

int oauth_basic_credentials(const char *h, char **id, char **secret)
{
	unsigned char raw[600];
	size_t len;
	const char *colon;

	*id = *secret = NULL;
	if (strncasecmp(h, "Basic ", 6) != 0)
		return -1;
	h += 6;
	while (*h == ' ')
		h++;
	if (crypto_b64_decode(h, strlen(h), raw, sizeof raw - 1, &len) < 0)
		return -1;
	raw[len] = '\0';
	if (strlen((char *)raw) != len)
		return -1;
	colon = strchr((char *)raw, ':');
	if (!colon)
		return -1;
	if (form_decode((char *)raw, (size_t)(colon - (char *)raw), id) < 0 ||
	    form_decode(colon + 1, len - (size_t)(colon + 1 - (char *)raw), secret) < 0) {
		free(*id);
		*id = NULL;
		crypto_wipe(raw, sizeof raw);
		return -1;
	}
	crypto_wipe(raw, sizeof raw);
	return 0;
}

/* What a token may be issued for: the portfolio, the most it may carry
 * (scopes, property codes; NULL codes = all of the portfolio's), and the
 * principal (client and/or user). */
struct grant {
	char portfolio_id[ID_MAX];
	unsigned scopes;
	json_t *codes;
	const char *client_id; /* NULL for an assertion without client auth */
	const char *user_id;   /* NULL for client credentials */
};

static int code_in(const json_t *codes, const char *code)
{
	size_t i;
	json_t *v;

	json_array_foreach(codes, i, v)
		if (!strcmp(json_string_value(v), code))
			return 1;
	return 0;
}

int oauth_scope_parse(const char *scope, unsigned allowed, const json_t *allowed_codes,
		      unsigned *want, json_t *want_codes)
{
	char *req = strdup(scope ? scope : ""), *save = NULL, *tok;
	unsigned bit;
	int rc = 0;

	*want = 0;
	if (!req)
		return -2;
	for (tok = strtok_r(req, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (!strncmp(tok, "property:", 9) && tok[9]) {
			if ((allowed_codes && !code_in(allowed_codes, tok + 9)) ||
			    json_array_size(want_codes) >= AUTH_MAX_PROPS) {
				rc = -1;
				break;
			}
			if (!code_in(want_codes, tok + 9) &&
			    json_array_append_new(want_codes, json_string(tok + 9)) < 0) {
				/* Not UTF-8, so no property's code: refused, not
				 * dropped (dropping it widened the token). */
				rc = validate_utf8_len(tok + 9, NULL) < 0 ? -1 : -2;
				break;
			}
			continue;
		}
		bit = auth_scope_bit(tok);
		if (!bit || !(allowed & bit)) {
			rc = -1;
			break;
		}
		*want |= bit;
	}
	free(req);
	return rc;
}

/* The properties of the grant's portfolio a token carries: those whose
 * codes were asked for (want_codes), else those the client is limited to
 * (cl->codes), else all; their ids and codes are appended to ids and codes
 * in id order. Returns 0 or a negative store status. */
struct grant_pick {
	const struct grant *cl;
	const json_t *want_codes;
	json_t *ids, *codes;
};

static void pick_property(void *arg, const char *id, const char *code)
{
	struct grant_pick *g = arg;

	if (json_array_size(g->want_codes) ? !code_in(g->want_codes, code)
					   : (g->cl->codes && !code_in(g->cl->codes, code)))
		return;
	json_array_append_new(g->ids, json_string(id));
	json_array_append_new(g->codes, json_string(code));
}

static int grant_properties(struct store_tx *tx, const struct grant *cl, const json_t *want_codes,
			    json_t *ids, json_t *codes)
{
	struct grant_pick g = {cl, want_codes, ids, codes};

	return portfolio_each_property(tx, cl->portfolio_id, pick_property, &g);
}

/* Answers 200 with an issued token: the scope granted (the scope names of
 * want, then "property:<code>" for each code asked for) and the codes the
 * token carries. */
static void send_token(struct ctx *c, const char *token, unsigned want, const json_t *want_codes,
		       const char *portfolio_id, json_t *codes)
{
	char granted[512];
	size_t i, gl;
	json_t *v;

	auth_scope_string(want, granted, sizeof granted);
	gl = strlen(granted);
	json_array_foreach(want_codes, i, v)
		if (gl + strlen(json_string_value(v)) + 11 < sizeof granted)
			gl += (size_t)snprintf(granted + gl, sizeof granted - gl, " property:%s",
					       json_string_value(v));
	response_header(c->res, "Cache-Control", "no-store");
	response_header(c->res, "Pragma", "no-cache");
	respond_raw_json(c, 200,
			 json_pack("{s:s, s:s, s:i, s:s, s:s, s:O}", "access_token", token,
				   "token_type", "Bearer", "expires_in", c->svc->cfg->token_ttl,
				   "scope", granted, "portfolio_id", portfolio_id, "property_codes",
				   codes));
}

/* Issues a token for the grant inside tx (committing it). Applies the
 * scope rules of API-CONTRACT §2 and answers the request (success or an
 * OAuth error); tx is finished either way. */
static void issue(struct ctx *c, struct store_tx *tx, const struct grant *cl, const char *scope)
{
	char token[AUTH_TOKEN_MAX] = "";
	json_t *want_codes = json_array(), *ids = json_array(), *codes = json_array();
	unsigned want = 0;
	int rc = STORE_ERR, narrowed;
	int64_t now = clock_now_ms();

	if (!want_codes || !ids || !codes)
		goto fail;
	rc = oauth_scope_parse(scope, cl->scopes, cl->codes, &want, want_codes);
	if (rc == -1)
		goto bad_scope;
	if (rc < 0) {
		rc = STORE_ERR;
		goto fail;
	}
	if (!want)
		want = cl->scopes;
	narrowed = json_array_size(want_codes) > 0 || cl->codes;
	if ((rc = grant_properties(tx, cl, want_codes, ids, codes)) < 0)
		goto fail;
	if (json_array_size(codes) < json_array_size(want_codes) ||
	    (narrowed && json_array_size(ids) > AUTH_MAX_PROPS))
		goto bad_scope; /* a requested code that is not a property here */
	{
		struct auth_grant g = {cl->portfolio_id,
				       cl->client_id,
				       cl->user_id,
				       want,
				       narrowed ? ids : NULL,
				       codes,
				       now,
				       now + (int64_t)c->svc->cfg->token_ttl * 1000};

		rc = auth_token_issue(tx, &g, token, sizeof token);
	}
	rc = store_finish(tx, rc);
	tx = NULL;
	if (rc != STORE_OK)
		goto fail;
	send_token(c, token, want, want_codes, cl->portfolio_id, codes);
	goto out;
bad_scope:
	store_rollback(tx);
	oauth_error(c, "invalid_scope",
		    "a requested scope or property is not available to this client");
	goto out;
fail:
	store_rollback(tx);
	respond_store_error(c, rc); /* a full disk or a busy database: 503 */
out:
	crypto_wipe(token, sizeof token);
	json_decref(want_codes);
	json_decref(ids);
	json_decref(codes);
}

#define SAML_GRANT "urn:ietf:params:oauth:grant-type:saml2-bearer"
#define SAML_SKEW_MS (120 * 1000)

/* Finds the portfolio whose trusted IdP issued the assertion: the client's
 * when the client authenticated, else the only portfolio trusting that
 * issuer. Returns 1 with *idp (the caller idp_free()s it), 0 (refused:
 * *why set) or < 0. */
static int find_idp(struct store_tx *tx, const char *portfolio_id, const char *issuer,
		    struct idp *idp, const char **why)
{
	int rc = idp_find(tx, portfolio_id, issuer, idp);

	if (rc == IDP_UNKNOWN)
		*why = portfolio_id
			       ? "the assertion's issuer is not this client's trusted identity provider"
			       : "the assertion's issuer is not a trusted identity provider";
	else if (rc == IDP_AMBIGUOUS)
		*why = "ambiguous issuer: several portfolios trust it; authenticate the client";
	return rc == IDP_FOUND ? 1 : rc < 0 ? rc : 0;
}

/* Finds or provisions (just in time) the user named by the assertion,
 * appending sso.user.provisioned for a new one. A JIT user's roles follow
 * each assertion; a SCIM user's roles stay SCIM's. Returns 1 with user_id,
 * 0 (refused: *why) or < 0. */
static int saml_user(struct store_tx *tx, const char *pf, const struct saml_assertion *a,
		     char *user_id, const char **why)
{
	struct directory_event ev;
	int rc = directory_user_login(tx, pf, a->name_id, a->display_name, a->roles, user_id,
				      ID_MAX, &ev);

	if (rc == 1) {
		*why = "the user is deactivated";
		return 0;
	}
	if (rc == 0)
		rc = user_event_append(tx, pf, &ev);
	return rc < 0 ? rc : 1;
}

int oauth_assertion_decode(const char *assertion, unsigned char **xml, size_t *len, size_t *cap)
{
	size_t n = strlen(assertion);

	*xml = NULL;
	*len = *cap = 0;
	while (n && assertion[n - 1] == '=')
		n--;
	if (n > SAML_MAX_XML * 4 / 3 + 4)
		return -1;
	*cap = n / 4 * 3 + 3;
	*xml = malloc(*cap);
	if (!*xml) {
		*cap = 0;
		return -2;
	}
	if (crypto_b64url_decode(assertion, n, *xml, *cap, len) < 0) {
		crypto_wipe(*xml, *cap);
		free(*xml);
		*xml = NULL;
		*len = *cap = 0;
		return -1;
	}
	return 0;
}

/* Decodes the assertion and reads its Issuer into issuer. Returns 1 with
 * *xml (len bytes of a cap-byte buffer the caller wipes and frees), 0
 * (refused: *why set) or < 0. */
static int decode_assertion(const char *assertion, unsigned char **xml, size_t *len, size_t *cap,
			    char *issuer, size_t issuer_size, const char **why)
{
	int rc = oauth_assertion_decode(assertion, xml, len, cap);

	if (rc == -2)
		return -1;
	if (rc < 0) {
		*why = "assertion must be base64url-encoded XML";
		return 0;
	}
	if (saml_peek_issuer((const char *)*xml, *len, issuer, issuer_size) < 0) {
		*why = "assertion is not a SAML 2.0 Assertion with an Issuer";
		return 0;
	}
	return 1;
}

/* Verifies the assertion's signature against the IdP's certificate and its
 * conditions against this service (Audience <public-url>/saml/sp,
 * Recipient <public-url>/oauth/token, SAML_SKEW_MS of clock skew), filling
 * *a. Returns 0, or -1 with the reason in err. */
static int verify_assertion(struct ctx *c, const unsigned char *xml, size_t len, const char *issuer,
			    const struct idp *idp, struct saml_assertion *a, char *err,
			    size_t err_size)
{
	char audience[600], recipient[600];

	snprintf(audience, sizeof audience, "%s/saml/sp", c->svc->cfg->public_url);
	snprintf(recipient, sizeof recipient, "%s/oauth/token", c->svc->cfg->public_url);
	{
		struct saml_expect e = {
			issuer,       idp->cert_pem,       audience, recipient, clock_now_ms(),
			SAML_SKEW_MS, idp->roles_attribute};

		return saml_verify((const char *)xml, len, &e, a, err, err_size) < 0 ? -1 : 0;
	}
}

/* Spends the verified assertion (one use only) and finds or provisions its
 * user in the IdP's portfolio. Returns 1 with user_id, 0 (refused: *why
 * set) or < 0. */
static int assertion_user(struct store_tx *tx, const struct idp *idp,
			  const struct saml_assertion *a, char *user_id, const char **why)
{
	int rc = idp_assertion_use(tx, idp->portfolio_id, a->id,
				   a->not_on_or_after_ms + SAML_SKEW_MS);

	if (rc == 1) {
		*why = "the assertion was already used";
		return 0;
	}
	if (rc < 0)
		return rc;
	return saml_user(tx, idp->portfolio_id, a, user_id, why);
}

/* The RFC 7522 grant: verify the assertion, enforce one-time use, find or
 * provision the user, issue a user token. cl holds the authenticated
 * client (client_id NULL when there was none). Consumes tx. */
static void saml_grant(struct ctx *c, struct store_tx *tx, struct grant *cl, const char *assertion,
		       const char *scope)
{
	unsigned char *xml = NULL;
	char issuer[512], err[256];
	char user_id[ID_MAX];
	struct idp idp = {0};
	const char *why = NULL;
	struct saml_assertion a;
	size_t len = 0, cap = 0;
	int rc;

	memset(&a, 0, sizeof a);
	rc = decode_assertion(assertion, &xml, &len, &cap, issuer, sizeof issuer, &why);
	if (rc < 0)
		goto fail;
	if (rc == 0)
		goto refuse;
	rc = find_idp(tx, cl->client_id ? cl->portfolio_id : NULL, issuer, &idp, &why);
	if (rc < 0)
		goto fail;
	if (rc == 0)
		goto refuse;
	if (verify_assertion(c, xml, len, issuer, &idp, &a, err, sizeof err) < 0) {
		why = err;
		goto refuse;
	}
	rc = assertion_user(tx, &idp, &a, user_id, &why);
	if (rc < 0)
		goto fail;
	if (rc == 0)
		goto refuse;
	snprintf(cl->portfolio_id, sizeof cl->portfolio_id, "%s", idp.portfolio_id);
	if (!cl->client_id)
		cl->scopes = AUTH_SCOPE_ALL;
	cl->user_id = user_id;
	snprintf(c->p.user_id, sizeof c->p.user_id, "%s", user_id);
	issue(c, tx, cl, scope);
	tx = NULL;
	goto out;
refuse:
	store_rollback(tx);
	tx = NULL;
	oauth_error(c, "invalid_grant", why);
	goto out;
fail:
	store_rollback(tx);
	tx = NULL;
	respond_error(c, ERR_INTERNAL, NULL, "internal error");
out:
	saml_assertion_free(&a);
	idp_free(&idp);
	if (xml)
		crypto_wipe(xml, cap);
	free(xml);
}

/* Checks the request's shape: a form body with a grant_type this server
 * issues for (*saml set for the SAML bearer grant, which also needs an
 * assertion). Returns 0, or -1 having answered with the OAuth error. */
static int check_grant_type(struct ctx *c, const struct form *f, int *saml)
{
	const char *grant = form_get(f, "grant_type");

	if (!grant) {
		oauth_error(c, "invalid_request", "grant_type is required");
		return -1;
	}
	*saml = !strcmp(grant, SAML_GRANT);
	if (!*saml && strcmp(grant, "client_credentials") != 0) {
		oauth_error(c, "unsupported_grant_type",
			    "grant_type must be client_credentials or " SAML_GRANT);
		return -1;
	}
	if (*saml && !form_get(f, "assertion")) {
		oauth_error(c, "invalid_request", "assertion is required");
		return -1;
	}
	return 0;
}

/* A token request's client authentication: from the Authorization header
 * (basic_id and basic_secret, owned and freed by client_creds_free) or
 * from the form body (borrowed); id and secret point at whichever. */
struct client_creds {
	char *basic_id, *basic_secret;
	const char *id, *secret;
};

/* Reads the client's credentials from Basic or the body (not both). Only
 * the SAML grant may come without them. Returns 0, or -1 having answered
 * with the OAuth error. */
static int read_client_creds(struct ctx *c, const struct form *f, int saml, struct client_creds *cc)
{
	const char *auth = http_header(c->req, "Authorization");

	if (auth && oauth_basic_credentials(auth, &cc->basic_id, &cc->basic_secret) < 0) {
		oauth_error(c, "invalid_client", "malformed Basic credentials");
		return -1;
	}
	if (cc->basic_id && (form_get(f, "client_id") || form_get(f, "client_secret"))) {
		oauth_error(c, "invalid_request",
			    "use one client authentication method, not Basic and body both");
		return -1;
	}
	cc->id = cc->basic_id ? cc->basic_id : form_get(f, "client_id");
	cc->secret = cc->basic_id ? cc->basic_secret : form_get(f, "client_secret");
	if ((!saml || cc->id || cc->secret) &&
	    (!cc->id || !cc->secret || strlen(cc->secret) > SECRET_MAX)) {
		oauth_error(c, "invalid_client", "client authentication failed");
		return -1;
	}
	return 0;
}

static void client_creds_free(struct client_creds *cc)
{
	if (cc->basic_secret)
		crypto_wipe(cc->basic_secret, strlen(cc->basic_secret));
	free(cc->basic_id);
	free(cc->basic_secret);
}

/* Verifies the client's secret inside tx and fills cl from the client
 * (portfolio, scopes, property codes, which cl then owns). Returns 0, or
 * -1 having rolled tx back and answered (invalid_client or 500). */
static int authenticate_client(struct ctx *c, struct store_tx *tx, const char *id,
			       const char *secret, struct grant *cl)
{
	struct auth_client ac;
	int rc = auth_client_verify(tx, id, secret, &ac);

	if (rc <= 0) {
		store_rollback(tx);
		if (rc < 0)
			respond_store_error(c, rc);
		else
			oauth_error(c, "invalid_client", "client authentication failed");
		return -1;
	}
	snprintf(cl->portfolio_id, sizeof cl->portfolio_id, "%s", ac.portfolio_id);
	cl->scopes = ac.scopes;
	cl->codes = ac.codes;
	cl->client_id = id;
	snprintf(c->p.client_id, sizeof c->p.client_id, "%s", id);
	return 0;
}

/* Wipes the secrets a token request's form carried, then frees it. */
static void token_form_free(struct form *f)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->name[i], "client_secret") || !strcmp(f->name[i], "assertion"))
			crypto_wipe(f->value[i], strlen(f->value[i]));
	form_free(f);
}

void oauth_h_token(struct ctx *c)
{
	const char *ct = http_header(c->req, "Content-Type"), *why = NULL;
	struct client_creds cc = {0};
	struct form f = {0};
	struct grant cl = {0};
	struct store_tx *tx = NULL;
	int rc;
	int saml = 0;

	if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0 ||
	    (ct[33] && ct[33] != ';' && ct[33] != ' ')) {
		oauth_error(c, "invalid_request",
			    "Content-Type must be application/x-www-form-urlencoded");
		return;
	}
	if (form_parse(c->req->body.data ? c->req->body.data : "", c->req->body.len, &f, &why) < 0) {
		oauth_error(c, "invalid_request", why);
		return;
	}
	if (check_grant_type(c, &f, &saml) < 0 || read_client_creds(c, &f, saml, &cc) < 0)
		goto out;
	if ((rc = store_begin(c->svc->store, 1, &tx)) != STORE_OK) {
		if (rc == STORE_BUSY || rc == STORE_FULL)
			respond_store_error(c, rc);
		else
			respond_error(c, ERR_UNAVAILABLE, NULL, "database unavailable");
		goto out;
	}
	if (cc.id && authenticate_client(c, tx, cc.id, cc.secret, &cl) < 0)
		goto out;
	if (saml)
		saml_grant(c, tx, &cl, form_get(&f, "assertion"), form_get(&f, "scope"));
	else
		issue(c, tx, &cl, form_get(&f, "scope"));
out:
	json_decref(cl.codes);
	client_creds_free(&cc);
	token_form_free(&f);
}

int oauth_purge(struct store *st, int64_t now_ms)
{
	struct store_tx *tx;
	int a, b;

	if (store_begin(st, 1, &tx) != STORE_OK)
		return -1;
	a = idp_assertions_purge(tx, now_ms);
	b = auth_tokens_purge(tx, now_ms);
	if (a < 0 || b < 0) {
		store_rollback(tx);
		return -1;
	}
	return store_commit(tx) == STORE_OK ? a + b : -1;
}

/* The grant types and client authentication methods the token endpoint
 * takes, as oauth_h_token implements them (check_grant_type,
 * read_client_creds). */
static const char *const grant_types[] = {"client_credentials", SAML_GRANT};
static const char *const auth_methods[] = {"client_secret_basic", "client_secret_post"};

static json_t *string_array(const char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_string(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* The permission scopes (API-CONTRACT §2) in canonical order, one name
 * each; the property:<code> items are per portfolio and not listed. */
static json_t *scope_array(void)
{
	char name[64];
	json_t *a = json_array();

	for (unsigned bit = 1; a && bit & AUTH_SCOPE_ALL; bit <<= 1) {
		auth_scope_string(bit, name, sizeof name);
		if (json_array_append_new(a, json_string(name)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

void oauth_h_metadata(struct ctx *c)
{
	const char *issuer = c->svc->cfg->public_url; /* no trailing slash (config.c) */
	char token_url[sizeof c->svc->cfg->public_url + 16];
	json_t *doc;

	snprintf(token_url, sizeof token_url, "%s/oauth/token", issuer);
	doc = json_pack("{s:s, s:s, s:o, s:o, s:o}", "issuer", issuer, "token_endpoint", token_url,
			"token_endpoint_auth_methods_supported",
			string_array(auth_methods, ARRAY_LEN(auth_methods)),
			"grant_types_supported", string_array(grant_types, ARRAY_LEN(grant_types)),
			"scopes_supported", scope_array());
	if (!doc) {
		respond_error(c, ERR_INTERNAL, NULL, "internal error");
		return;
	}
	respond_raw_json(c, 200, doc);
}

static const struct route routes[] = {
	{"POST", "/oauth/token", oauth_h_token, ROUTE_PUBLIC, 0, 0, BODY_FORM, NULL, 0, 0, 0},
	ROUTE_PUB("GET", "/.well-known/oauth-authorization-server", oauth_h_metadata),
};
const struct route_table oauth_routes = ROUTE_TABLE(routes);
