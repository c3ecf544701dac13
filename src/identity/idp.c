#include "identity/idp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

int idp_find(struct store_tx *tx, const char *portfolio_id, const char *issuer, struct idp *out)
{
	struct store_rows *r;
	int rc, n = 0;

	memset(out, 0, sizeof *out);
	rc = store_query(tx,
			 "SELECT portfolio_id, cert_pem, roles_attribute FROM identity_providers"
			 " WHERE entity_id = $1 AND ($2 = '' OR portfolio_id = $2)",
			 (struct store_val[]){sv_text(issuer),
					      sv_text(portfolio_id ? portfolio_id : "")},
			 2, &r);
	if (rc != STORE_OK)
		return rc;
	while ((rc = store_next(r)) == 1) {
		if (n++)
			break;
		snprintf(out->portfolio_id, sizeof out->portfolio_id, "%s", store_text(r, 0));
		out->cert_pem = strdup(store_text(r, 1));
		snprintf(out->roles_attribute, sizeof out->roles_attribute, "%s", store_text(r, 2));
	}
	store_rows_close(r);
	if (rc >= 0 && n == 1 && out->cert_pem)
		return IDP_FOUND;
	idp_free(out);
	if (rc < 0)
		return rc;
	if (n == 1)
		return STORE_ERR; /* no memory for the certificate */
	return n ? IDP_AMBIGUOUS : IDP_UNKNOWN;
}

void idp_free(struct idp *p)
{
	free(p->cert_pem);
	memset(p, 0, sizeof *p);
}

int idp_set(struct store_tx *tx, const char *portfolio_id, const char *entity_id,
	    const char *cert_pem, const char *roles_attribute, int64_t now_ms)
{
	int rc = store_exec(tx,
			    "INSERT INTO identity_providers (portfolio_id, entity_id, cert_pem,"
			    " roles_attribute, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)"
			    " ON CONFLICT (portfolio_id) DO UPDATE SET entity_id = $2, cert_pem = $3,"
			    " roles_attribute = $4, updated_at = $5",
			    (struct store_val[]){sv_text(portfolio_id), sv_text(entity_id),
						 sv_text(cert_pem),
						 sv_text(roles_attribute ? roles_attribute : "roles"),
						 sv_int(now_ms)},
			    5);

	return rc < 0 ? rc : 0;
}

int idp_assertion_use(struct store_tx *tx, const char *portfolio_id, const char *assertion_id,
		      int64_t expires_ms)
{
	int rc = store_exec(tx,
			    "INSERT INTO saml_assertions_used (portfolio_id, assertion_id, expires_at)"
			    " VALUES ($1, $2, $3)",
			    (struct store_val[]){sv_text(portfolio_id), sv_text(assertion_id),
						 sv_int(expires_ms)},
			    3);

	if (rc == STORE_CONSTRAINT)
		return 1;
	return rc < 0 ? rc : 0;
}

int idp_assertions_purge(struct store_tx *tx, int64_t now_ms)
{
	return store_exec(tx, "DELETE FROM saml_assertions_used WHERE expires_at <= $1",
			  (struct store_val[]){sv_int(now_ms)}, 1);
}
