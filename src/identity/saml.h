/* saml: verification of signed SAML 2.0 assertions (RFC 7522 bearer grants).
 * The only module that includes xmlsec headers. It accepts exactly one
 * signed <saml:Assertion> as the document root, verified against one pinned
 * IdP certificate, and reads claims only from that verified element. */
#ifndef REVOPS_SAML_H
#define REVOPS_SAML_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

#define SAML_MAX_XML (64 * 1024)

struct saml_expect {
	const char *idp_entity_id; /* expected <Issuer> of the assertion */
	const char *idp_cert_pem;  /* trusted IdP signing certificate, PEM text */
	const char *audience; /* must appear in Conditions/AudienceRestriction/Audience: "<public-url>/saml/sp" */
	const char *recipient; /* SubjectConfirmationData/@Recipient must equal: "<public-url>/oauth/token" */
	int64_t now_ms;
	int64_t skew_ms;             /* allowed clock skew, e.g. 120000 */
	const char *roles_attribute; /* Attribute Name whose AttributeValues are roles, e.g. "roles" */
};

struct saml_assertion {
	char id[256];      /* the assertion's ID attribute (caller enforces one-time use) */
	char name_id[256]; /* Subject/NameID text */
	char issuer[512];
	int64_t not_on_or_after_ms; /* earliest of Conditions/@NotOnOrAfter and SubjectConfirmationData/@NotOnOrAfter */
	json_t *roles; /* array of strings (possibly empty); owned; free with saml_assertion_free */
	char display_name[256]; /* optional attribute "displayName" value or "" */
};

/* Global xmlsec/libxml2 init for the OpenSSL backend; call once at process
 * start before threads; 0 or -1. It does not change libxml2's process-wide
 * parser defaults (entity substitution, DTD loading stay off). */
int saml_global_init(void) WUR;
/* Shuts xmlsec down. libxml2 itself is left initialised (other modules use
 * it); the process owner calls xmlCleanupParser at exit if it wants to. */
void saml_global_cleanup(void);
/* Verifies one SAML 2.0 <saml:Assertion> document (xml, len bytes, NOT
 * base64). Returns 0 and fills out (the caller frees it with
 * saml_assertion_free), or -1 with a precise short reason in err (the caller
 * answers 400 invalid_grant with it) and out left empty. Reasons never quote
 * the assertion. Thread-safe after saml_global_init.
 *
 * Refused: more than SAML_MAX_XML bytes; any DOCTYPE, entity or xml:id; a
 * root other than saml:Assertion (Version 2.0, NCName ID); a second
 * Assertion anywhere; no ds:Signature as a direct child of the root, or a
 * second one anywhere; a SignedInfo other than exclusive C14N + RSA-SHA256
 * or ECDSA-SHA256 with one Reference to "#<root ID>" (enveloped-signature and
 * exclusive C14N transforms, SHA-256 digest); a signature that does not
 * verify with e->idp_cert_pem (KeyInfo is ignored). Then, from the verified
 * root only: Issuer (Format absent or entity) must equal e->idp_entity_id;
 * NameID must be one text node; Conditions must hold the time window (with
 * e->skew_ms either way), an AudienceRestriction naming e->audience in each
 * restriction, and no condition other than OneTimeUse/ProxyRestriction; a
 * bearer SubjectConfirmation must have Recipient e->recipient, a live
 * NotOnOrAfter and no future NotBefore. */
int saml_verify(const char *xml, size_t len, const struct saml_expect *e,
		struct saml_assertion *out, char *err, size_t errcap) WUR;
/* Reads the Issuer of an assertion WITHOUT verifying anything, only so the
 * caller can pick which IdP's certificate to verify it with (saml_verify
 * then checks the Issuer again, on the verified element). Same parser
 * hardening as saml_verify. Returns 0 with the issuer in out, or -1. */
int saml_peek_issuer(const char *xml, size_t len, char *out, size_t cap) WUR;
/* Releases what saml_verify put in a; safe on an emptied or zeroed a. */
void saml_assertion_free(struct saml_assertion *a);

#endif
