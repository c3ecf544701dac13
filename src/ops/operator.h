/* operator: operator actions on the database, shared by revopsctl and by
 * revopsd --demo. Each returns 0 with *out (an owned JSON object) or -1
 * with a message in err; input is validated here, not by the callers. */
#ifndef REVOPS_OPERATOR_H
#define REVOPS_OPERATOR_H
#include <jansson.h>
#include <stdint.h>
#include "core/buf.h"
#include "core/common.h"

struct store;

struct operator_property {
	const char *portfolio_id, *name, *brand, *code, *billing_id, *timezone, *currency;
	const char *nip; /* may be NULL */
};

struct operator_ceiling {
	const char *portfolio_id, *brand, *currency, *valid_from, *valid_to; /* valid_to NULL = open */
	int64_t max_minor_units;
	const char *room_types; /* comma-separated, NULL or "" = all */
};

int operator_portfolio_create(struct store *st, const char *name, const char *plan, json_t **out,
			      struct buf *err) WUR;
int operator_portfolio_show(struct store *st, const char *id, json_t **out, struct buf *err) WUR;
/* per_minute 0 clears the override. */
int operator_set_rate_limit(struct store *st, const char *id, int64_t per_minute, json_t **out,
			    struct buf *err) WUR;
int operator_property_add(struct store *st, const struct operator_property *p, json_t **out,
			  struct buf *err) WUR;
int operator_ceiling_add(struct store *st, const struct operator_ceiling *c, json_t **out,
			 struct buf *err) WUR;
/* scopes: space-separated (NULL = all); codes: comma-separated (NULL = all).
 * The secret is in *out once and stored only as a hash. */
int operator_client_create(struct store *st, const char *portfolio_id, const char *name,
			   const char *scopes, const char *codes, json_t **out, struct buf *err) WUR;
int operator_scim_token_create(struct store *st, const char *portfolio_id, json_t **out,
			       struct buf *err) WUR;
/* roles: comma-separated role names. */
int operator_user_create(struct store *st, const char *portfolio_id, const char *user_name,
			 const char *display_name, const char *roles, json_t **out,
			 struct buf *err) WUR;
int operator_user_list(struct store *st, const char *portfolio_id, json_t **out, struct buf *err) WUR;
/* Trusts an IdP for the SAML bearer grant of a portfolio (one per
 * portfolio; replaces the previous one). cert_pem: the signing certificate. */
int operator_idp_set(struct store *st, const char *portfolio_id, const char *entity_id,
		     const char *cert_pem, const char *roles_attribute, json_t **out,
		     struct buf *err) WUR;
/* announced: RFC 3339 UTC ("2026-06-01T00:00:00Z", optional .mmm). */
int operator_deprecation_add(struct store *st, const char *method, const char *route,
			     const char *announced, const char *note, json_t **out,
			     struct buf *err) WUR;
/* Seeds the demo portfolios of API-CONTRACT §0 when the database has no
 * portfolio yet, and writes <data_dir>/demo-credentials.json (mode 0600).
 * Returns 1 when seeded, 0 when data already existed, -1 on error. */
int operator_demo_seed(struct store *st, const char *public_url, const char *data_dir,
		       struct buf *err) WUR;
/* Lists the portfolio's outbox events after sequence number after (0 = from
 * the start), oldest first, at most limit. */
int operator_event_list(struct store *st, const char *portfolio_id, int64_t after, int64_t limit,
			json_t **out, struct buf *err) WUR;
/* Appends count synthetic events (data {"synthetic": true, "n": i}) of a
 * known type of the surface ("v1" or "v2"; NULL = v2) to the portfolio's
 * outbox, one transaction per 10,000, for exercising webhook receivers
 * and the delivery benchmark. property (a prop_ id of the portfolio, may
 * be NULL) becomes the events' only property. {"emitted": n}. */
int operator_event_emit(struct store *st, const char *portfolio_id, const char *surface,
			const char *type, int64_t count, const char *property, json_t **out,
			struct buf *err) WUR;
/* Recomputes a decision's audit chain from the stored entries (offline,
 * the same computation as the API's chain_valid): {decision_id, entries,
 * head_hash, chain_valid}. */
/* revopsctl review-template set: the reply template of a rating band
 * (low|mid|high) and language. */
int operator_review_template_set(struct store *st, const char *portfolio_id, const char *band,
				 const char *language, const char *text, json_t **out,
				 struct buf *err) WUR;
/* revopsctl reputation-ceiling set: a brand's floor on its reputation
 * score (0-10). */
int operator_reputation_floor_set(struct store *st, const char *portfolio_id, const char *brand,
				  const char *min_score, json_t **out, struct buf *err) WUR;
int operator_audit_verify(struct store *st, const char *decision_id, json_t **out,
			  struct buf *err) WUR;

/* revopsctl sla-tier set: the minutes of a portfolio's SLA tier (absent
 * ones keep the built-in defaults; operations/sla.h). */
int operator_sla_tier_set(struct store *st, const char *portfolio_id, const char *tier,
			  const char *task_ack_minutes, const char *task_escalate_minutes,
			  const char *guest_reply_minutes, json_t **out, struct buf *err) WUR;
/* revopsctl oncall set: replaces the portfolio's on-call rota with the
 * JSON document text, checked first (operations/oncall.h). */
int operator_oncall_set(struct store *st, const char *portfolio_id, const char *text, json_t **out,
			struct buf *err) WUR;

/* revopsctl whatsapp set: a property's WhatsApp Cloud API channel, its
 * secrets sealed under key (never echoed). */
int operator_whatsapp_set(struct store *st, const unsigned char key[32], const char *portfolio_id,
			  const char *property_id, const char *phone_number_id,
			  const char *access_token, const char *app_secret,
			  const char *verify_token, json_t **out, struct buf *err) WUR;
/* revopsctl guest-keywords set: the words that escalate a guest's message
 * at once, for a language (or "*"); "" removes the list. */
int operator_guest_keywords_set(struct store *st, const char *portfolio_id, const char *language,
				const char *words, json_t **out, struct buf *err) WUR;

#endif
