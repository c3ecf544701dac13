/* idp: the SAML identity provider each portfolio trusts (entity id, signing
 * certificate, roles attribute) and the one-time-use record of SAML
 * assertion ids. The only module that touches identity_providers and
 * saml_assertions_used. It reads and writes rows only: saml.c verifies
 * assertions (and is the only file that includes xmlsec). */
#ifndef REVOPS_IDP_H
#define REVOPS_IDP_H
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store_tx;

#define IDP_ROLES_ATTR_MAX 128

/* A trusted IdP as idp_find() reads it. */
struct idp {
	char portfolio_id[ID_MAX];
	char *cert_pem; /* PEM text, malloc'd; idp_free() releases it */
	char roles_attribute[IDP_ROLES_ATTR_MAX];
};

enum idp_find_result {
	IDP_UNKNOWN = 0, /* no portfolio (or not the one given) trusts the issuer */
	IDP_FOUND = 1,
	IDP_AMBIGUOUS = 2, /* several portfolios trust it and none was given */
};

/* Finds the IdP whose entity id is issuer: the one of portfolio_id when it
 * is not NULL, else the only portfolio trusting that issuer. Returns
 * IDP_FOUND with *out filled (the caller calls idp_free), IDP_UNKNOWN or
 * IDP_AMBIGUOUS with *out empty, or a negative store status. */
int idp_find(struct store_tx *tx, const char *portfolio_id, const char *issuer, struct idp *out) WUR;
/* Releases what idp_find put in p; safe on a zeroed p. */
void idp_free(struct idp *p);

/* Trusts an IdP for the SAML bearer grant of portfolio_id, replacing the
 * one it trusted before (one per portfolio). roles_attribute NULL means
 * "roles". Returns 0 or a negative store status. */
int idp_set(struct store_tx *tx, const char *portfolio_id, const char *entity_id,
	    const char *cert_pem, const char *roles_attribute, int64_t now_ms) WUR;

/* Records the use of assertion assertion_id issued for portfolio_id, kept
 * until expires_ms. Returns 0 when first used, 1 when it was used before
 * (the grant is refused), or a negative store status. */
int idp_assertion_use(struct store_tx *tx, const char *portfolio_id, const char *assertion_id,
		      int64_t expires_ms) WUR;
/* Forgets the used assertions that expired by now_ms. Returns how many, or
 * a negative store status. */
int idp_assertions_purge(struct store_tx *tx, int64_t now_ms) WUR;

#endif
