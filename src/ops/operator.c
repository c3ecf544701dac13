#include "ops/operator.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/deprecation.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "core/id.h"
#include "core/validate.h"
#include "events/outbox.h"
#include "feeds/reputation.h"
#include "feeds/reviews.h"
#include "identity/auth.h"
#include "identity/directory.h"
#include "identity/idp.h"
#include "portfolio/portfolio.h"
#include "rates/audit_trail.h"
#include "guests/keywords.h"
#include "guests/whatsapp.h"
#include "operations/oncall.h"
#include "operations/sla.h"
#include "store/store.h"

static int fail(struct buf *err, const char *msg)
{
	buf_reset(err);
	if (buf_puts(err, msg) < 0)
		return -1;
	return -1;
}

static int is_plan(const char *p)
{
	return p && (!strcmp(p, "chain_starter") || !strcmp(p, "group") || !strcmp(p, "enterprise"));
}

static int is_currency(const char *s)
{
	return s && strlen(s) == 3 && isupper((unsigned char)s[0]) &&
	       isupper((unsigned char)s[1]) && isupper((unsigned char)s[2]);
}

/* A code: 1..32 of A-Z a-z 0-9 - _ . */
static int is_text(const char *s, size_t max)
{
	return s && *s && strlen(s) <= max;
}

static int begin(struct store *st, struct store_tx **tx, struct buf *err)
{
	if (store_begin(st, 1, tx) != STORE_OK)
		return fail(err, "database unavailable");
	return 0;
}

static int commit(struct store_tx *tx, struct buf *err)
{
	if (store_commit(tx) != STORE_OK)
		return fail(err, "could not commit");
	return 0;
}

int operator_portfolio_create(struct store *st, const char *name, const char *plan, json_t **out,
			      struct buf *err)
{
	struct store_tx *tx;
	char id[ID_MAX];

	*out = NULL;
	if (!is_text(name, 200))
		return fail(err, "--name is required (at most 200 characters)");
	if (!is_plan(plan))
		return fail(err, "--plan must be chain_starter, group or enterprise");
	if (id_new("pf_", id, sizeof id) < 0 || begin(st, &tx, err) < 0)
		return -1;
	if (portfolio_create(tx, id, name, plan) < 0 || portfolio_load(tx, id, out) != 1) {
		store_rollback(tx);
		json_decref(*out);
		*out = NULL;
		return fail(err, "could not create the portfolio");
	}
	if (commit(tx, err) < 0) {
		json_decref(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

int operator_portfolio_show(struct store *st, const char *id, json_t **out, struct buf *err)
{
	struct store_tx *tx;
	json_t *props = NULL;
	int64_t limit = 0;
	int rc;

	*out = NULL;
	if (!id || store_begin(st, 0, &tx) != STORE_OK)
		return fail(err, id ? "database unavailable" : "--portfolio is required");
	rc = portfolio_load(tx, id, out);
	if (rc == 1 && portfolio_properties(tx, id, &props) == 0 &&
	    portfolio_rate_limit(tx, id, &limit) == 1) {
		json_object_set_new(*out, "properties", props);
		json_object_set_new(*out, "rate_limit_per_minute",
				    json_integer(limit ? limit
						       : auth_plan_rate_limit(json_string_value(
								 json_object_get(*out, "plan")))));
		json_object_set_new(*out, "rate_limit_override", limit ? json_true() : json_false());
		store_rollback(tx);
		return 0;
	}
	json_decref(props);
	json_decref(*out);
	*out = NULL;
	store_rollback(tx);
	return fail(err, rc == 0 ? "no such portfolio" : "could not read the portfolio");
}

int operator_set_rate_limit(struct store *st, const char *id, int64_t per_minute, json_t **out,
			    struct buf *err)
{
	struct store_tx *tx;
	int rc;

	*out = NULL;
	if (!id)
		return fail(err, "--portfolio is required");
	if (per_minute < 0 || per_minute > 100000000)
		return fail(err, "--per-minute must be 0 (plan figure) to 100000000");
	if (begin(st, &tx, err) < 0)
		return -1;
	rc = portfolio_set_rate_limit(tx, id, per_minute);
	if (rc != 1) {
		store_rollback(tx);
		return fail(err, rc == 0 ? "no such portfolio" : "could not update the portfolio");
	}
	if (commit(tx, err) < 0)
		return -1;
	*out = json_pack("{s:s, s:o}", "portfolio_id", id, "rate_limit_per_minute",
			 per_minute ? json_integer(per_minute) : json_null());
	return 0;
}

int operator_property_add(struct store *st, const struct operator_property *p, json_t **out,
			  struct buf *err)
{
	struct store_tx *tx;
	json_t *all = NULL, *v;
	char id[ID_MAX];
	size_t i;
	int rc;

	*out = NULL;
	if (!p->portfolio_id)
		return fail(err, "--portfolio is required");
	if (!is_text(p->name, 200) || !is_text(p->brand, 100))
		return fail(err, "--name and --brand are required (at most 200/100 characters)");
	if (!validate_code(p->code))
		return fail(err, "--code must be 1-32 letters, digits, '-', '_' or '.'");
	if (!is_text(p->billing_id, 64) || !is_text(p->timezone, 64))
		return fail(err, "--billing-id and --timezone are required");
	if (!is_currency(p->currency))
		return fail(err, "--currency must be an ISO 4217 code such as PLN");
	if (p->nip && (strlen(p->nip) != 10 || strspn(p->nip, "0123456789") != 10))
		return fail(err, "--nip must be 10 digits");
	if (id_new("prop_", id, sizeof id) < 0 || begin(st, &tx, err) < 0)
		return -1;
	if (portfolio_exists(tx, p->portfolio_id) != 1) {
		store_rollback(tx);
		return fail(err, "no such portfolio");
	}
	rc = portfolio_property_add(tx, &(struct portfolio_property_new){id, p->portfolio_id,
									 p->name, p->brand, p->code,
									 p->billing_id, p->timezone,
									 p->currency, p->nip});
	if (rc < 0 || portfolio_properties(tx, p->portfolio_id, &all) < 0) {
		store_rollback(tx);
		json_decref(all);
		return fail(err, rc == STORE_CONSTRAINT ? "that property code exists in the portfolio"
							: "could not add the property");
	}
	json_array_foreach(all, i, v)
		if (!strcmp(json_string_value(json_object_get(v, "id")), id))
			*out = json_incref(v);
	json_decref(all);
	return commit(tx, err) < 0 ? (json_decref(*out), *out = NULL, -1) : 0;
}

/* Splits a comma-separated list into a JSON array of strings, checking each
 * item with ok(). Returns NULL when an item is invalid. */
static json_t *split_list(const char *s, int (*ok)(const char *))
{
	json_t *arr = json_array();
	char *copy = strdup(s ? s : ""), *save = NULL, *tok;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!ok(tok)) {
			json_decref(arr);
			arr = NULL;
			break;
		}
		json_array_append_new(arr, json_string(tok));
	}
	free(copy);
	return arr;
}

int operator_ceiling_add(struct store *st, const struct operator_ceiling *c, json_t **out,
			 struct buf *err)
{
	struct store_tx *tx;
	json_t *codes, *pf = NULL, *v;
	char id[ID_MAX], *codes_s;
	int64_t from, to;
	size_t i;
	int rc;

	*out = NULL;
	if (!c->portfolio_id || !is_text(c->brand, 100))
		return fail(err, "--portfolio and --brand are required");
	if (!is_currency(c->currency))
		return fail(err, "--currency must be an ISO 4217 code such as PLN");
	if (c->max_minor_units <= 0)
		return fail(err, "--max must be a positive integer (minor units)");
	if (!c->valid_from || clock_parse_date(c->valid_from, &from) < 0)
		return fail(err, "--valid-from must be a date YYYY-MM-DD");
	if (c->valid_to && (clock_parse_date(c->valid_to, &to) < 0 || to < from))
		return fail(err, "--valid-to must be a date YYYY-MM-DD on or after --valid-from");
	codes = split_list(c->room_types, validate_code);
	if (!codes)
		return fail(err, "--room-types must be comma-separated room type codes");
	codes_s = json_dumps(codes, JSON_COMPACT);
	json_decref(codes);
	if (!codes_s || id_new("bc_", id, sizeof id) < 0 || begin(st, &tx, err) < 0) {
		free(codes_s);
		return -1;
	}
	if (portfolio_exists(tx, c->portfolio_id) != 1) {
		store_rollback(tx);
		free(codes_s);
		return fail(err, "no such portfolio");
	}
	rc = portfolio_ceiling_add(tx, &(struct portfolio_ceiling_new){id, c->portfolio_id, c->brand,
								       c->currency, codes_s,
								       c->valid_from, c->valid_to,
								       c->max_minor_units});
	free(codes_s);
	if (rc < 0 || portfolio_load(tx, c->portfolio_id, &pf) != 1) {
		store_rollback(tx);
		json_decref(pf);
		return fail(err, "could not add the brand ceiling");
	}
	json_array_foreach(json_object_get(pf, "brand_ceilings"), i, v)
		if (!strcmp(json_string_value(json_object_get(v, "id")), id))
			*out = json_incref(v);
	json_decref(pf);
	return commit(tx, err) < 0 ? (json_decref(*out), *out = NULL, -1) : 0;
}

static int is_scope(const char *s)
{
	return auth_scope_bit(s) != 0;
}

/* Reads --scopes (names separated by spaces or commas) into *bits; no
 * --scopes means every scope. Returns 0, or -1 with a message in err when a
 * name is unknown or none is given. */
static int parse_scopes(const char *scopes, unsigned *bits, struct buf *err)
{
	char *copy, *sp;

	*bits = 0;
	if (!scopes) {
		*bits = AUTH_SCOPE_ALL;
		return 0;
	}
	copy = strdup(scopes);
	for (sp = copy; sp && *sp; sp++)
		if (*sp == ',')
			*sp = ' ';
	for (sp = strtok(copy, " "); sp; sp = strtok(NULL, " ")) {
		if (!is_scope(sp)) {
			free(copy);
			return fail(err, "--scopes has an unknown permission scope");
		}
		*bits |= auth_scope_bit(sp);
	}
	free(copy);
	if (!*bits)
		return fail(err, "--scopes must name at least one permission scope");
	return 0;
}

/* Checks inside tx that the portfolio exists and that each code of
 * code_list (may be NULL) is one of its properties. Returns 0, or -1 with
 * a message in err (tx is left to the caller). */
static int check_client_target(struct store_tx *tx, const char *portfolio_id,
			       const json_t *code_list, struct buf *err)
{
	struct portfolio_property prop;
	json_t *v;
	size_t i;

	if (portfolio_exists(tx, portfolio_id) != 1)
		return fail(err, "no such portfolio");
	json_array_foreach(code_list, i, v)
		if (portfolio_property_by_code(tx, portfolio_id, json_string_value(v), &prop) != 1)
			return fail(err,
				    "--properties names a code that is not a property of the portfolio");
	return 0;
}

/* The answer to client create: the credentials, the scope names of bits
 * and the property codes (null when the client has all of them). */
static json_t *client_json(const char *id, const char *secret, const char *portfolio_id,
			   unsigned bits, json_t *code_list)
{
	char scope_s[512], *save = NULL, *tok;
	json_t *out;

	auth_scope_string(bits, scope_s, sizeof scope_s);
	out = json_pack("{s:s, s:s, s:s, s:[], s:o}", "client_id", id, "client_secret", secret,
			"portfolio_id", portfolio_id, "scopes", "property_codes",
			code_list ? json_incref(code_list) : json_null());
	for (tok = strtok_r(scope_s, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
		json_array_append_new(json_object_get(out, "scopes"), json_string(tok));
	return out;
}

int operator_client_create(struct store *st, const char *portfolio_id, const char *name,
			   const char *scopes, const char *codes, json_t **out, struct buf *err)
{
	struct store_tx *tx;
	json_t *code_list = NULL;
	char id[ID_MAX], secret[64] = "";
	unsigned bits;
	int rc = -1;

	*out = NULL;
	if (!portfolio_id)
		return fail(err, "--portfolio is required");
	if (parse_scopes(scopes, &bits, err) < 0)
		return -1;
	if (codes) {
		code_list = split_list(codes, validate_code);
		if (!code_list || !json_array_size(code_list)) {
			json_decref(code_list);
			return fail(err, "--properties must be comma-separated property codes");
		}
	}
	if (begin(st, &tx, err) < 0)
		goto out;
	if (check_client_target(tx, portfolio_id, code_list, err) < 0) {
		store_rollback(tx);
		goto out;
	}
	if (auth_client_create(tx, portfolio_id, name ? name : "client", bits, code_list, id,
			       sizeof id, secret, sizeof secret) < 0) {
		store_rollback(tx);
		fail(err, "could not create the client");
		goto out;
	}
	if (commit(tx, err) < 0)
		goto out;
	*out = client_json(id, secret, portfolio_id, bits, code_list);
	rc = 0;
out:
	crypto_wipe(secret, sizeof secret);
	json_decref(code_list);
	return rc;
}

int operator_scim_token_create(struct store *st, const char *portfolio_id, json_t **out,
			       struct buf *err)
{
	struct store_tx *tx;
	char token[AUTH_TOKEN_MAX];

	*out = NULL;
	if (!portfolio_id)
		return fail(err, "--portfolio is required");
	if (begin(st, &tx, err) < 0)
		return -1;
	if (portfolio_exists(tx, portfolio_id) != 1 ||
	    auth_scim_token_create(tx, portfolio_id, token, sizeof token) < 0) {
		store_rollback(tx);
		return fail(err, "no such portfolio");
	}
	if (commit(tx, err) < 0)
		return -1;
	*out = json_pack("{s:s, s:s}", "portfolio_id", portfolio_id, "scim_token", token);
	crypto_wipe(token, sizeof token);
	return 0;
}

int operator_user_create(struct store *st, const char *portfolio_id, const char *user_name,
			 const char *display_name, const char *roles, json_t **out, struct buf *err)
{
	struct store_tx *tx;
	json_t *role_list;
	char id[ID_MAX], names[96], msg[128];
	int rc;

	*out = NULL;
	if (!portfolio_id || !is_text(user_name, 256))
		return fail(err, "--portfolio and --user-name are required");
	role_list = split_list(roles, directory_is_role);
	if (!role_list) {
		directory_roles_text(names, sizeof names);
		snprintf(msg, sizeof msg, "--roles must be %s", names);
		return fail(err, msg);
	}
	rc = begin(st, &tx, err);
	if (rc == 0) {
		rc = directory_user_create(tx, portfolio_id, user_name, display_name, role_list,
					   "admin", id, sizeof id);
		if (rc < 0) {
			store_rollback(tx);
			fail(err, rc == STORE_CONSTRAINT ? "that user exists, or no such portfolio"
							 : "could not create the user");
			rc = -1;
		} else {
			rc = commit(tx, err);
		}
	}
	if (rc == 0)
		*out = json_pack("{s:s, s:s, s:s, s:b, s:O}", "id", id, "portfolio_id", portfolio_id,
				 "user_name", user_name, "active", 1, "roles", role_list);
	json_decref(role_list);
	return rc < 0 ? -1 : 0;
}

int operator_user_list(struct store *st, const char *portfolio_id, json_t **out, struct buf *err)
{
	struct store_tx *tx;
	int rc;

	*out = NULL;
	if (!portfolio_id)
		return fail(err, "--portfolio is required");
	if (store_begin(st, 0, &tx) != STORE_OK)
		return fail(err, "database unavailable");
	rc = directory_user_summaries(tx, portfolio_id, out);
	store_rollback(tx);
	if (rc < 0)
		return fail(err, "could not list users");
	return 0;
}

int operator_idp_set(struct store *st, const char *portfolio_id, const char *entity_id,
		     const char *cert_pem, const char *roles_attribute, json_t **out, struct buf *err)
{
	struct store_tx *tx;
	int64_t now = clock_now_ms();

	*out = NULL;
	if (!portfolio_id || !is_text(entity_id, 1024))
		return fail(err, "--portfolio and --entity-id are required");
	if (!cert_pem || strlen(cert_pem) > 64 * 1024 || !crypto_cert_pem_valid(cert_pem))
		return fail(err, "--cert must be a file holding one PEM X.509 certificate");
	if (roles_attribute && !is_text(roles_attribute, 256))
		return fail(err, "--roles-attribute must be 1-256 characters");
	if (begin(st, &tx, err) < 0)
		return -1;
	if (portfolio_exists(tx, portfolio_id) != 1) {
		store_rollback(tx);
		return fail(err, "no such portfolio");
	}
	if (idp_set(tx, portfolio_id, entity_id, cert_pem, roles_attribute, now) < 0) {
		store_rollback(tx);
		return fail(err, "could not store the identity provider");
	}
	if (commit(tx, err) < 0)
		return -1;
	*out = json_pack("{s:s, s:s, s:s}", "portfolio_id", portfolio_id, "entity_id", entity_id,
			 "roles_attribute", roles_attribute ? roles_attribute : "roles");
	return 0;
}

/* Runs fn(tx, arg) inside a write transaction of the existing portfolio
 * pf, with what for the failure message. Returns 0 or -1 (err set). */
static int in_portfolio(struct store *st, const char *pf, int (*fn)(struct store_tx *tx, void *arg),
			void *arg, const char *what, struct buf *err)
{
	struct store_tx *tx;
	char msg[160];

	if (begin(st, &tx, err) < 0)
		return -1;
	if (portfolio_exists(tx, pf) != 1) {
		store_rollback(tx);
		return fail(err, "no such portfolio");
	}
	if (fn(tx, arg) < 0) {
		store_rollback(tx);
		snprintf(msg, sizeof msg, "could not store the %s", what);
		return fail(err, msg);
	}
	return commit(tx, err);
}

struct template_args {
	const char *pf, *band, *language, *text;
};

static int set_template(struct store_tx *tx, void *arg)
{
	struct template_args *t = arg;

	return review_template_set(tx, t->pf, t->band, t->language, t->text, clock_now_ms());
}

int operator_review_template_set(struct store *st, const char *pf, const char *band,
				 const char *language, const char *text, json_t **out,
				 struct buf *err)
{
	char lang[40];
	size_t i;
	struct template_args t = {pf, band, lang, text};

	*out = NULL;
	if (!pf)
		return fail(err, "--portfolio is required");
	if (!band || (strcmp(band, "low") && strcmp(band, "mid") && strcmp(band, "high")))
		return fail(err, "--band must be low (score below 6), mid (below 8) or high");
	if (!is_text(language, 35) || !validate_code(language))
		return fail(err, "--language must be a language tag such as en or pl-PL");
	if (!is_text(text, 8192) || validate_utf8_len(text, NULL) < 0)
		return fail(err, "--text (or --file) must hold 1-8192 bytes of UTF-8 text");
	for (i = 0; language[i] && i < sizeof lang - 1; i++)
		lang[i] = (char)tolower((unsigned char)language[i]);
	lang[i] = '\0';
	if (in_portfolio(st, pf, set_template, &t, "reply template", err) < 0)
		return -1;
	*out = json_pack("{s:s, s:s, s:s, s:s}", "portfolio_id", pf, "band", band, "language", lang,
			 "text", text);
	return 0;
}

struct floor_args {
	const char *pf, *brand;
	int64_t x100;
};

static int set_floor(struct store_tx *tx, void *arg)
{
	struct floor_args *f = arg;

	return reputation_floor_set(tx, f->pf, f->brand, f->x100, clock_now_ms());
}

int operator_reputation_floor_set(struct store *st, const char *pf, const char *brand,
				  const char *min_score, json_t **out, struct buf *err)
{
	struct floor_args f = {pf, brand, -1};
	char *end = NULL;
	double v = min_score ? strtod(min_score, &end) : -1;

	*out = NULL;
	if (!pf || !is_text(brand, 100))
		return fail(err, "--portfolio and --brand are required");
	if (!min_score || !*min_score || !end || *end || !(v >= 0 && v <= 10))
		return fail(err, "--min-score must be a number from 0 to 10 (such as 8.2)");
	f.x100 = (int64_t)(v * 100.0 + 0.5);
	if (in_portfolio(st, pf, set_floor, &f, "reputation ceiling", err) < 0)
		return -1;
	*out = json_pack("{s:s, s:s, s:o}", "portfolio_id", pf, "brand", brand, "min_score",
			 reputation_score_json(f.x100));
	return 0;
}

int operator_event_list(struct store *st, const char *portfolio_id, int64_t after, int64_t limit,
			json_t **out, struct buf *err)
{
	struct store_tx *tx;
	int rc;

	*out = NULL;
	if (!portfolio_id)
		return fail(err, "--portfolio is required");
	if (after < 0 || limit < 1 || limit > 10000)
		return fail(err, "--after must be >= 0 and --limit 1-10000");
	if (store_begin(st, 0, &tx) != STORE_OK)
		return fail(err, "database unavailable");
	rc = outbox_list_json(tx, portfolio_id, after, limit, out);
	store_rollback(tx);
	if (rc < 0)
		return fail(err, "could not list events");
	return 0;
}

#define EMIT_TX_EVENTS 10000

int operator_event_emit(struct store *st, const char *portfolio_id, const char *surface,
			const char *type, int64_t count, const char *property, json_t **out,
			struct buf *err)
{
	struct store_tx *tx = NULL;
	json_t *props = NULL, *data = NULL;
	int64_t i;
	int rc;

	*out = NULL;
	if (!surface)
		surface = "v2";
	if (!portfolio_id || !type)
		return fail(err, "--portfolio and --type are required");
	if (strcmp(surface, "v1") && strcmp(surface, "v2"))
		return fail(err, "--surface must be v1 or v2");
	if (!outbox_event_known(surface, type))
		return fail(err, "--type is not an event type of that surface");
	if (count < 1 || count > 10000000)
		return fail(err, "--count must be 1-10000000");
	if (store_begin(st, 0, &tx) != STORE_OK)
		return fail(err, "database unavailable");
	rc = portfolio_exists(tx, portfolio_id);
	if (rc == 1 && property)
		rc = portfolio_has_property(tx, portfolio_id, property);
	store_rollback(tx);
	tx = NULL;
	if (rc != 1)
		return fail(err, rc < 0 ? "database unavailable" : "no such portfolio or property");
	props = property ? json_pack("[s]", property) : json_array();
	for (i = 0; i < count; i++) {
		if (!tx && store_begin(st, 1, &tx) != STORE_OK) {
			tx = NULL;
			rc = fail(err, "database unavailable");
			goto out;
		}
		data = json_pack("{s:b, s:I}", "synthetic", 1, "n", (json_int_t)i);
		rc = outbox_append(tx, surface, type, portfolio_id, props, data, NULL, 0);
		json_decref(data);
		if (rc < 0) {
			rc = fail(err, "could not append the event");
			goto out;
		}
		if ((i + 1) % EMIT_TX_EVENTS == 0 || i + 1 == count) {
			rc = commit(tx, err);
			tx = NULL;
			if (rc < 0)
				goto out;
		}
	}
	*out = json_pack("{s:I}", "emitted", (json_int_t)count);
	rc = 0;
out:
	store_rollback(tx);
	json_decref(props);
	return rc;
}

int operator_audit_verify(struct store *st, const char *decision_id, json_t **out, struct buf *err)
{
	struct store_tx *tx;
	json_t *trail = NULL;
	int rc;

	*out = NULL;
	if (!decision_id)
		return fail(err, "usage: audit verify DECISION_ID");
	if (store_begin(st, 0, &tx) != STORE_OK)
		return fail(err, "database unavailable");
	rc = audit_load(tx, decision_id, &trail);
	store_rollback(tx);
	if (rc <= 0)
		return fail(err, rc == 0 ? "no audit trail for that decision"
					 : "could not read the trail");
	*out = json_pack("{s:s, s:I, s:O, s:O}", "decision_id", decision_id, "entries",
			 (json_int_t)json_array_size(json_object_get(trail, "entries")),
			 "head_hash", json_object_get(trail, "head_hash"), "chain_valid",
			 json_object_get(trail, "chain_valid"));
	json_decref(trail);
	return 0;
}

int operator_deprecation_add(struct store *st, const char *method, const char *route,
			     const char *announced, const char *note, json_t **out, struct buf *err)
{
	static const char *methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
	struct store_tx *tx;
	int64_t at;
	size_t i;

	*out = NULL;
	for (i = 0; method && i < ARRAY_LEN(methods); i++)
		if (!strcmp(method, methods[i]))
			break;
	if (!method || i == ARRAY_LEN(methods))
		return fail(err, "--method must be GET, POST, PUT, PATCH or DELETE");
	if (!route || route[0] != '/' || strlen(route) >= 160)
		return fail(err, "--route must be a route pattern such as /v2/portfolios/{id}");
	if (!announced || clock_parse_time(announced, &at) < 0)
		return fail(err, "--announced must be RFC 3339 UTC, e.g. 2026-06-01T00:00:00Z");
	if (begin(st, &tx, err) < 0)
		return -1;
	if (deprecation_record(tx, method, route, at, note ? note : "") < 0) {
		store_rollback(tx);
		return fail(err, "could not record the deprecation");
	}
	if (commit(tx, err) < 0)
		return -1;
	*out = json_pack("{s:s, s:s, s:s, s:s}", "method", method, "route", route, "announced_at",
			 announced, "note", note ? note : "");
	return 0;
}

/* Writes text (plus a newline) to path atomically (temp file, fsync,
 * rename) with the given mode. Returns 0 or -1. */
static int write_file(const char *path, const char *text, mode_t mode)
{
	char tmp[1300];
	size_t len = strlen(text);
	int fd;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || fsync(fd) < 0) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

struct demo_prop {
	const char *name, *brand, *code, *tz, *nip;
};

/* One demo portfolio: its name, plan, the domain of its users and IdP,
 * its properties and the brands that get a ceiling. */
struct demo_portfolio {
	const char *name, *plan, *domain;
	const struct demo_prop *props;
	int nprops;
	const char *const *brands;
	int nbrands;
};

static const struct demo_prop demo_ent_props[] = {
	{"Vistula Grand Warsaw", "Vistula Grand", "WAW01", "Europe/Warsaw", "5260250995"},
	{"Vistula Grand Krakow", "Vistula Grand", "KRK01", "Europe/Warsaw", "5260250995"},
	{"Vistula Grand Gdansk", "Vistula Grand", "GDN01", "Europe/Warsaw", "5260250995"},
	{"Amber Stay Poznan", "Amber Stay", "POZ01", "Europe/Warsaw", "7792433421"},
	{"Amber Stay Wroclaw", "Amber Stay", "WRO01", "Europe/Warsaw", "7792433421"},
};
static const struct demo_prop demo_grp_props[] = {
	{"Tatra Lodge Zakopane", "Tatra Lodge", "ZAK01", "Europe/Warsaw", "7361001520"},
	{"Tatra Lodge Katowice", "Tatra Lodge", "KTW01", "Europe/Warsaw", "7361001520"},
	{"Tatra Lodge Lodz", "Tatra Lodge", "LOD01", "Europe/Warsaw", "7361001520"},
};
static const char *const demo_ent_brands[] = {"Vistula Grand", "Amber Stay"};
static const char *const demo_grp_brands[] = {"Tatra Lodge"};

/* The demo data of API-CONTRACT §0, seeded in this order. */
static const struct demo_portfolio demo_portfolios[] = {
	{"Demo Hotels Enterprise", "enterprise", "enterprise.demo.example", demo_ent_props, 5,
	 demo_ent_brands, 2},
	{"Demo Hotels Group", "group", "group.demo.example", demo_grp_props, 3, demo_grp_brands, 1},
};

/* Adds the demo portfolio's properties to portfolio pid (billing id
 * BILL-<code>, currency PLN), appending {id, pms_property_code, brand} of
 * each to plist. Returns 0 or -1 with a message in err. */
static int seed_properties(struct store *st, const char *pid, const struct demo_portfolio *d,
			   json_t *plist, struct buf *err)
{
	char billing[32];
	json_t *obj;
	int i;

	for (i = 0; i < d->nprops; i++) {
		const struct demo_prop *dp = &d->props[i];
		struct operator_property p = {pid,     dp->name, dp->brand, dp->code,
					      billing, dp->tz,   "PLN",     dp->nip};

		snprintf(billing, sizeof billing, "BILL-%s", dp->code);
		if (operator_property_add(st, &p, &obj, err) < 0)
			return -1;
		json_array_append_new(plist, json_pack("{s:O, s:O, s:O}", "id",
						       json_object_get(obj, "id"), "pms_property_code",
						       json_object_get(obj, "pms_property_code"),
						       "brand", json_object_get(obj, "brand")));
		json_decref(obj);
	}
	return 0;
}

/* Adds a PLN 1,200.00 ceiling for each demo brand, for all room types,
 * valid from today with no end; appends {id, brand, currency,
 * max_minor_units} of each to clist. Returns 0 or -1 with a message in
 * err. */
static int seed_ceilings(struct store *st, const char *pid, const struct demo_portfolio *d,
			 json_t *clist, struct buf *err)
{
	char today[11];
	json_t *obj;
	int i;

	clock_format_date(clock_now_ms() / 86400000, today);
	for (i = 0; i < d->nbrands; i++) {
		struct operator_ceiling c = {pid, d->brands[i], "PLN", today, NULL, 120000, NULL};

		if (operator_ceiling_add(st, &c, &obj, err) < 0)
			return -1;
		json_array_append_new(clist,
				      json_pack("{s:O, s:O, s:O, s:O}", "id",
						json_object_get(obj, "id"), "brand",
						json_object_get(obj, "brand"), "currency",
						json_object_get(obj, "currency"), "max_minor_units",
						json_object_get(obj, "max_minor_units")));
		json_decref(obj);
	}
	return 0;
}

/* Creates one user per directory role, <role>@<domain> (approver, finance,
 * ops). Returns 0 or -1 with a message in err. */
static int seed_users(struct store *st, const char *pid, const char *domain, struct buf *err)
{
	static const char *names[DIRECTORY_NROLES] = {"approver", "finance", "ops"};
	char user[128];
	json_t *u;
	int i;

	for (i = 0; i < DIRECTORY_NROLES; i++) {
		snprintf(user, sizeof user, "%s@%s", names[i], domain);
		if (operator_user_create(st, pid, user, names[i], directory_role_names[i], &u, err) <
		    0)
			return -1;
		json_decref(u);
	}
	return 0;
}

/* Seeds one demo portfolio and appends its credentials to creds. */
static int seed_one(struct store *st, const struct demo_portfolio *d, const char *public_url,
		    const char *idp_cert, json_t *creds, struct buf *err)
{
	char entity[256], approver[128];
	json_t *pf = NULL, *cl = NULL, *scim = NULL, *idp = NULL;
	json_t *plist = json_array(), *clist = json_array();
	const char *pid;
	int rc = -1;

	if (operator_portfolio_create(st, d->name, d->plan, &pf, err) < 0)
		goto out;
	pid = json_string_value(json_object_get(pf, "id"));
	if (seed_properties(st, pid, d, plist, err) < 0 || seed_ceilings(st, pid, d, clist, err) < 0)
		goto out;
	if (operator_client_create(st, pid, "demo", NULL, NULL, &cl, err) < 0 ||
	    operator_scim_token_create(st, pid, &scim, err) < 0 ||
	    seed_users(st, pid, d->domain, err) < 0)
		goto out;
	snprintf(approver, sizeof approver, "approver@%s", d->domain);
	snprintf(entity, sizeof entity, "https://idp.%s/saml", d->domain);
	if (operator_idp_set(st, pid, entity, idp_cert, "roles", &idp, err) < 0)
		goto out;
	json_array_append_new(
		creds, json_pack("{s:s, s:s, s:s, s:O, s:O, s:O, s:O, s:O, s:s, s:{s:s, s:s+, s:s+}}",
				 "portfolio_id", pid, "name", d->name, "plan", d->plan, "client_id",
				 json_object_get(cl, "client_id"), "client_secret",
				 json_object_get(cl, "client_secret"), "scim_token",
				 json_object_get(scim, "scim_token"), "properties", plist,
				 "brand_ceilings", clist, "approver_saml_subject", approver, "saml",
				 "idp_entity_id", entity, "audience", public_url, "/saml/sp",
				 "recipient", public_url, "/oauth/token"));
	rc = 0;
out:
	json_decref(idp);
	json_decref(pf);
	json_decref(cl);
	json_decref(scim);
	json_decref(plist);
	json_decref(clist);
	return rc;
}

/* Whether to seed: returns 1 on an empty database (no portfolio), 0 when
 * data exists, -1 with a message in err when it cannot be read. */
static int demo_needed(struct store *st, struct buf *err)
{
	struct store_tx *tx;
	int64_t n = 0;
	int rc;

	if (store_begin(st, 0, &tx) != STORE_OK)
		return fail(err, "database unavailable");
	rc = portfolio_count(tx, &n);
	store_rollback(tx);
	if (rc != 1)
		return fail(err, "database unavailable");
	return n > 0 ? 0 : 1;
}

/* Makes the demo IdP's key and self-signed certificate and writes them to
 * key_path (0600) and cert_path (0644). Returns 0 with *key and *cert (the
 * caller wipes the key and frees both, also on failure), or -1 with a
 * message in err. */
static int write_demo_idp(const char *key_path, const char *cert_path, char **key, char **cert,
			  struct buf *err)
{
	if (crypto_self_signed("revops demo IdP", 3650, key, cert) < 0)
		return fail(err, "cannot make the demo IdP key");
	if (write_file(key_path, *key, 0600) < 0 || write_file(cert_path, *cert, 0644) < 0)
		return fail(err, "cannot write the demo IdP key and certificate");
	return 0;
}

/* Writes <data_dir>/demo-credentials.json (0600): the URLs, the seeded
 * portfolios' credentials (creds) and where the demo IdP's files are.
 * Returns 0 or -1 with a message in err. */
static int write_credentials(const char *public_url, const char *data_dir, json_t *creds,
			     const char *key_path, const char *cert_path, struct buf *err)
{
	char path[1200], *text = NULL;
	json_t *doc;
	int rc = 0;

	doc = json_pack("{s:s, s:s+, s:O, s:{s:s, s:s}}", "base_url", public_url, "token_url",
			public_url, "/oauth/token", "portfolios", creds, "demo_idp",
			"private_key_file", key_path, "certificate_file", cert_path);
	text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	snprintf(path, sizeof path, "%s/demo-credentials.json", data_dir);
	if (!text || write_file(path, text, 0600) < 0)
		rc = fail(err, "cannot write demo-credentials.json");
	if (text)
		crypto_wipe(text, strlen(text));
	free(text);
	json_decref(doc);
	return rc;
}

int operator_demo_seed(struct store *st, const char *public_url, const char *data_dir, struct buf *err)
{
	char key_path[1200], cert_path[1200];
	char *idp_key = NULL, *idp_cert = NULL;
	json_t *creds = NULL;
	size_t i;
	int rc;

	rc = demo_needed(st, err);
	if (rc <= 0)
		return rc;
	rc = -1;
	creds = json_array();
	snprintf(key_path, sizeof key_path, "%s/demo-idp-key.pem", data_dir);
	snprintf(cert_path, sizeof cert_path, "%s/demo-idp-cert.pem", data_dir);
	if (write_demo_idp(key_path, cert_path, &idp_key, &idp_cert, err) < 0)
		goto out;
	for (i = 0; i < ARRAY_LEN(demo_portfolios); i++)
		if (seed_one(st, &demo_portfolios[i], public_url, idp_cert, creds, err) < 0)
			goto out;
	if (write_credentials(public_url, data_dir, creds, key_path, cert_path, err) < 0)
		goto out;
	rc = 1;
out:
	if (idp_key)
		crypto_wipe(idp_key, strlen(idp_key));
	free(idp_key);
	free(idp_cert);
	json_decref(creds);
	return rc;
}

/* ----------------------------------------------------------- operations */

/* A count of minutes of --name: 1..SLA_MAX_MINUTES, or the default d when
 * absent. Returns 0, or -1 (err set). */
static int minutes(const char *name, const char *v, int64_t d, int64_t *out, struct buf *err)
{
	char *end = NULL, msg[120];
	long long n = v ? strtoll(v, &end, 10) : d;

	if (v && (!*v || *end))
		n = -1;
	if (n < 1 || n > SLA_MAX_MINUTES) {
		snprintf(msg, sizeof msg, "--%s must be a number of minutes from 1 to %d", name,
			 SLA_MAX_MINUTES);
		return fail(err, msg);
	}
	*out = n;
	return 0;
}

struct tier_args {
	const char *pf, *tier;
	struct sla_settings s;
};

static int set_tier(struct store_tx *tx, void *arg)
{
	struct tier_args *t = arg;

	return sla_set(tx, t->pf, t->tier, &t->s, clock_now_ms());
}

int operator_sla_tier_set(struct store *st, const char *pf, const char *tier, const char *ack,
			  const char *escalate, const char *reply, json_t **out, struct buf *err)
{
	struct tier_args t = {pf, tier, {0, 0, 0}};

	*out = NULL;
	if (!pf || !sla_tier_valid(tier))
		return fail(err, "--portfolio and --tier standard|gold|platinum are required");
	sla_defaults(tier, &t.s);
	if (minutes("task-ack-minutes", ack, t.s.task_ack_minutes, &t.s.task_ack_minutes, err) < 0 ||
	    minutes("task-escalate-minutes", escalate, t.s.task_escalate_minutes,
		    &t.s.task_escalate_minutes, err) < 0 ||
	    minutes("guest-reply-minutes", reply, t.s.guest_reply_minutes, &t.s.guest_reply_minutes,
		    err) < 0)
		return -1;
	if (in_portfolio(st, pf, set_tier, &t, "SLA tier", err) < 0)
		return -1;
	*out = json_pack("{s:s, s:s, s:I, s:I, s:I}", "portfolio_id", pf, "tier", tier,
			 "task_ack_minutes", (json_int_t)t.s.task_ack_minutes,
			 "task_escalate_minutes", (json_int_t)t.s.task_escalate_minutes,
			 "guest_reply_minutes", (json_int_t)t.s.guest_reply_minutes);
	return 0;
}

int operator_oncall_set(struct store *st, const char *pf, const char *text, json_t **out,
			struct buf *err)
{
	json_error_t jerr;
	json_t *doc;
	struct store_tx *tx = NULL;
	char why[400];
	int rc;

	*out = NULL;
	if (!pf || !text)
		return fail(err, "--portfolio and --file are required");
	if (!(doc = json_loads(text, JSON_REJECT_DUPLICATES, &jerr))) {
		snprintf(why, sizeof why, "the rota is not JSON: %s (line %d)", jerr.text, jerr.line);
		return fail(err, why);
	}
	if (begin(st, &tx, err) < 0)
		goto fail;
	if (portfolio_exists(tx, pf) != 1) {
		fail(err, "no such portfolio");
		goto fail;
	}
	rc = oncall_check(tx, pf, doc, why, sizeof why);
	if (rc == 1) {
		fail(err, why);
		goto fail;
	}
	if (rc < 0 || oncall_set(tx, pf, doc, clock_now_ms()) < 0) {
		fail(err, "could not store the rota");
		goto fail;
	}
	if (commit(tx, err) < 0) {
		tx = NULL;
		goto fail;
	}
	*out = json_pack("{s:s, s:i, s:I, s:I}", "portfolio_id", pf, "levels", oncall_levels(doc),
			 "rotations", (json_int_t)json_array_size(json_object_get(doc, "rotations")),
			 "overrides", (json_int_t)json_array_size(json_object_get(doc, "overrides")));
	json_decref(doc);
	return 0;
fail:
	store_rollback(tx);
	json_decref(doc);
	return -1;
}

/* --------------------------------------------------------- guest messaging */

struct wa_args {
	const unsigned char *key;
	const char *pf, *property, *pnid, *token, *secret, *verify;
	int taken; /* the phone number id is another property's */
};

static int set_whatsapp(struct store_tx *tx, void *arg)
{
	struct wa_args *w = arg;
	int rc = portfolio_has_property(tx, w->pf, w->property);

	if (rc != 1)
		return rc < 0 ? rc : STORE_ERR;
	rc = whatsapp_channel_set(tx, w->key, w->pf, w->property, w->pnid, w->token, w->secret,
				  w->verify, clock_now_ms());
	w->taken = rc == 1;
	return rc == 0 ? 0 : STORE_ERR;
}

int operator_whatsapp_set(struct store *st, const unsigned char key[32], const char *pf,
			  const char *property, const char *pnid, const char *token,
			  const char *secret, const char *verify, json_t **out, struct buf *err)
{
	struct wa_args w = {key, pf, property, pnid, token, secret, verify, 0};

	*out = NULL;
	if (!pf || !property)
		return fail(err, "--portfolio and --property are required");
	if (!pnid || !*pnid || strlen(pnid) > 64 || strspn(pnid, "0123456789") != strlen(pnid))
		return fail(err,
			    "--phone-number-id must be the Cloud API's phone number id (digits)");
	if (!is_text(token, 2048) || !is_text(secret, 256))
		return fail(err, "--access-token and --app-secret are required");
	if (!verify || strlen(verify) < 8 || strlen(verify) > 256)
		return fail(err, "--verify-token must be 8 to 256 characters");
	if (in_portfolio(st, pf, set_whatsapp, &w, "WhatsApp channel", err) < 0) {
		if (w.taken) {
			buf_reset(err);
			return fail(err,
				    "--phone-number-id is the WhatsApp number of another property");
		}
		return -1;
	}
	/* the secrets are never echoed */
	*out = json_pack("{s:s, s:s, s:s, s:b, s:b, s:b}", "portfolio_id", pf, "property_id",
			 property, "phone_number_id", pnid, "access_token_set", 1, "app_secret_set",
			 1, "verify_token_set", 1);
	return 0;
}

struct keyword_args {
	const char *pf, *language, *words;
	int kept;
};

static int set_keywords(struct store_tx *tx, void *arg)
{
	struct keyword_args *k = arg;
	int rc = keywords_set(tx, k->pf, k->language, k->words, clock_now_ms());

	k->kept = rc;
	return rc < 0 ? rc : 0;
}

int operator_guest_keywords_set(struct store *st, const char *pf, const char *language,
				const char *words, json_t **out, struct buf *err)
{
	struct keyword_args k = {pf, language, words, 0};
	size_t n = 0;
	const char *p;

	*out = NULL;
	if (!pf || !words)
		return fail(err, "--portfolio and --words are required (\"\" removes the list)");
	if (!language || (strcmp(language, "*") &&
			  (strlen(language) < 2 || strlen(language) > 8 ||
			   strspn(language, "abcdefghijklmnopqrstuvwxyz") != strlen(language))))
		return fail(err, "--language must be a primary language tag such as pl, or *");
	for (p = words; *p; p++)
		n += *p == ',';
	if (n >= KEYWORDS_MAX || strlen(words) > KEYWORDS_MAX * KEYWORD_MAX)
		return fail(err, "--words holds at most 200 comma-separated words");
	for (const char *s = words; *s;) {
		size_t len = strcspn(s, ",");

		if (len >= KEYWORD_MAX)
			return fail(err, "a keyword has at most 63 bytes");
		s += len + (s[len] == ',');
	}
	if (in_portfolio(st, pf, set_keywords, &k, "keywords", err) < 0)
		return -1;
	*out = json_pack("{s:s, s:s, s:i}", "portfolio_id", pf, "language", language, "keywords",
			 k.kept);
	return 0;
}
