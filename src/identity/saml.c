/* saml: verification of signed SAML 2.0 assertions.
 *
 * The order of work is the security argument, so it is kept strict:
 *  1. parse from memory with no network, no DTD (stopped at <!DOCTYPE), no
 *     entity substitution;
 *  2. check the shape before any crypto: the root is the one and only
 *     saml:Assertion in the document, it carries exactly one ds:Signature as
 *     a direct child, whose single Reference points at the root's ID, with
 *     only the algorithms we allow;
 *  3. register that one ID ourselves and let xmlsec verify with the pinned
 *     certificate's key (KeyInfo in the document is never consulted);
 *  4. only then read claims, and only from the verified root element.
 * Everything that does not fit is refused with a short reason that never
 * quotes the document. */
#include "core/clock.h"
#include "identity/saml.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/tree.h>
#include <libxml/valid.h>
#include <libxml/xmlerror.h>

#include <xmlsec/crypto.h>
#include <xmlsec/errors.h>
#include <xmlsec/transforms.h>
#include <xmlsec/xmldsig.h>
#include <xmlsec/xmlsec.h>

#define NS_SAML "urn:oasis:names:tc:SAML:2.0:assertion"
#define NS_DSIG "http://www.w3.org/2000/09/xmldsig#"
#define ALG_EXC_C14N "http://www.w3.org/2001/10/xml-exc-c14n#"
#define ALG_ENVELOPED "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
#define ALG_RSA_SHA256 "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
#define ALG_ECDSA_SHA256 "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256"
#define ALG_SHA256 "http://www.w3.org/2001/04/xmlenc#sha256"
#define CM_BEARER "urn:oasis:names:tc:SAML:2.0:cm:bearer"
#define NAMEID_ENTITY "urn:oasis:names:tc:SAML:2.0:nameid-format:entity"

static int saml_ready;

/* xmlsec reports through this; its messages name library internals, and we
 * answer with our own reasons, so they are dropped. */
static void quiet_xmlsec(const char *file, int line, const char *func, const char *obj,
			 const char *subj, int reason, const char *msg)
{
	(void)file;
	(void)line;
	(void)func;
	(void)obj;
	(void)subj;
	(void)reason;
	(void)msg;
}

static void quiet_generic(void *ctx, const char *msg, ...)
{
	(void)ctx;
	(void)msg;
}

static void quiet_structured(void *ctx, xmlErrorPtr e)
{
	(void)ctx;
	(void)e;
}

int saml_global_init(void)
{
	xmlInitParser();
	if (xmlSecInit() < 0)
		return -1;
	if (xmlSecCheckVersion() != 1)
		goto fail_sec;
	if (xmlSecCryptoAppInit(NULL) < 0)
		goto fail_sec;
	if (xmlSecCryptoInit() < 0)
		goto fail_app;
	xmlSecErrorsSetCallback(quiet_xmlsec);
	saml_ready = 1;
	return 0;
fail_app:
	xmlSecCryptoAppShutdown();
fail_sec:
	xmlSecShutdown();
	return -1;
}

void saml_global_cleanup(void)
{
	if (!saml_ready)
		return;
	saml_ready = 0;
	xmlSecCryptoShutdown();
	xmlSecCryptoAppShutdown();
	xmlSecShutdown();
}

void saml_assertion_free(struct saml_assertion *a)
{
	if (a == NULL)
		return;
	json_decref(a->roles);
	a->roles = NULL;
}

/* ---- parsing ---------------------------------------------------------- */

/* SAX hook for <!DOCTYPE ...> and anything declared in it: note it and stop
 * the parser before a single declaration is processed. */
static void stop_on_dtd(void *ctx, const xmlChar *name, const xmlChar *ext_id, const xmlChar *sys_id)
{
	xmlParserCtxtPtr p = ctx;

	(void)name;
	(void)ext_id;
	(void)sys_id;
	*(int *)p->_private = 1;
	xmlStopParser(p);
}

static void stop_on_entity(void *ctx, const xmlChar *name, int type, const xmlChar *pub_id,
			   const xmlChar *sys_id, xmlChar *content)
{
	(void)type;
	(void)content;
	stop_on_dtd(ctx, name, pub_id, sys_id);
}

/* Parses len bytes into a tree. Returns the document (caller frees), or NULL
 * with *dtd set when a DOCTYPE or declaration was seen. */
static xmlDocPtr parse_xml(const char *xml, size_t len, int *dtd)
{
	xmlParserCtxtPtr p;
	xmlDocPtr doc = NULL;

	*dtd = 0;
	p = xmlCreateMemoryParserCtxt(xml, (int)len);
	if (p == NULL)
		return NULL;
	/* No XML_PARSE_NOENT, DTDLOAD, DTDATTR, HUGE; no NOBLANKS either, since
	 * whitespace is part of what was signed. */
	xmlCtxtUseOptions(p, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	p->_private = dtd;
	p->sax->internalSubset = stop_on_dtd;
	p->sax->externalSubset = stop_on_dtd;
	p->sax->entityDecl = stop_on_entity;
	if (xmlParseDocument(p) == 0 && p->wellFormed && !*dtd)
		doc = p->myDoc;
	else if (p->myDoc != NULL)
		xmlFreeDoc(p->myDoc);
	p->myDoc = NULL;
	xmlFreeParserCtxt(p);
	return doc;
}

/* ---- tree helpers ------------------------------------------------------ */

static int is_el(xmlNodePtr n, const char *ns, const char *name)
{
	return n != NULL && n->type == XML_ELEMENT_NODE && n->ns != NULL && n->ns->href != NULL &&
	       strcmp((const char *)n->ns->href, ns) == 0 &&
	       strcmp((const char *)n->name, name) == 0;
}

/* Counts the element children of parent named {ns}name; *first gets the
 * first one (or NULL). */
static int children_named(xmlNodePtr parent, const char *ns, const char *name, xmlNodePtr *first)
{
	xmlNodePtr c;
	int n = 0;

	*first = NULL;
	for (c = xmlFirstElementChild(parent); c != NULL; c = xmlNextElementSibling(c)) {
		if (!is_el(c, ns, name))
			continue;
		if (n++ == 0)
			*first = c;
	}
	return n;
}

/* The value of the un-namespaced attribute name, or NULL. Points into the
 * tree; only plain text values are accepted. */
static const char *attr(xmlNodePtr el, const char *name)
{
	xmlAttrPtr a = xmlHasNsProp(el, (const xmlChar *)name, NULL);

	if (a == NULL || a->type != XML_ATTRIBUTE_NODE)
		return NULL;
	if (a->children == NULL)
		return "";
	if (a->children->next != NULL || a->children->type != XML_TEXT_NODE ||
	    a->children->content == NULL)
		return NULL;
	return (const char *)a->children->content;
}

/* The text of el when it consists of exactly one text node and nothing else:
 * no comment, element, CDATA section or entity reference beside it. NULL
 * otherwise (including when el is empty). */
static const char *single_text(xmlNodePtr el)
{
	xmlNodePtr c = el->children;

	if (c == NULL || c->next != NULL || c->type != XML_TEXT_NODE || c->content == NULL)
		return NULL;
	return (const char *)c->content;
}

static int copy_str(char *dst, size_t cap, const char *s)
{
	size_t n = strlen(s);

	if (n >= cap)
		return -1;
	memcpy(dst, s, n + 1);
	return 0;
}

/* Copies at most cap-1 bytes of UTF-8 s, cutting only at a character
 * boundary. */
static void copy_utf8_trunc(char *dst, size_t cap, const char *s)
{
	size_t n = strlen(s);

	if (n >= cap) {
		n = cap - 1;
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* What a walk over the whole document found. */
struct scan {
	int assertions; /* {saml}Assertion elements anywhere */
	int signatures; /* {dsig}Signature elements anywhere */
	int entities;   /* entity references or declarations */
};

/* Visits every node below (and including) root without recursion. */
static void scan_tree(xmlNodePtr root, struct scan *s)
{
	xmlNodePtr cur = root;
	xmlAttrPtr a;
	xmlNodePtr v;

	while (cur != NULL) {
		switch (cur->type) {
		case XML_ELEMENT_NODE:
			if (is_el(cur, NS_SAML, "Assertion"))
				s->assertions++;
			if (is_el(cur, NS_DSIG, "Signature"))
				s->signatures++;
			for (a = cur->properties; a != NULL; a = a->next)
				for (v = a->children; v != NULL; v = v->next)
					if (v->type != XML_TEXT_NODE)
						s->entities++;
			break;
		case XML_TEXT_NODE:
		case XML_CDATA_SECTION_NODE:
		case XML_COMMENT_NODE:
		case XML_PI_NODE:
			break;
		default:
			s->entities++;
			break;
		}
		if (cur->type == XML_ELEMENT_NODE && cur->children != NULL) {
			cur = cur->children;
			continue;
		}
		while (cur != root && cur->next == NULL)
			cur = cur->parent;
		if (cur == root)
			break;
		cur = cur->next;
	}
}

/* xs:ID values as IdPs issue them: an ASCII NCName. */
static int valid_id(const char *id)
{
	size_t i;

	if (!((id[0] >= 'A' && id[0] <= 'Z') || (id[0] >= 'a' && id[0] <= 'z') || id[0] == '_'))
		return 0;
	for (i = 1; id[i] != '\0'; i++) {
		char c = id[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return 0;
	}
	return i < 256;
}

/* ---- xs:dateTime ------------------------------------------------------ */

static int digits(const char *s, int n, int *out)
{
	int i, v = 0;

	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

/* Parses "YYYY-MM-DDThh:mm:ss[.f+](Z|(+|-)hh:mm)" into milliseconds since the
 * epoch. A time zone is required; fractions beyond milliseconds are
 * truncated. Returns 0, or -1 on anything else. */
static int parse_datetime(const char *s, int64_t *ms)
{
	static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int y, mo, d, h, mi, sec, frac = 0, fdigits = 0, oh = 0, om = 0, sign = 0, leap;
	const char *p;

	if (strlen(s) < 20 || digits(s, 4, &y) < 0 || s[4] != '-' || digits(s + 5, 2, &mo) < 0 ||
	    s[7] != '-' || digits(s + 8, 2, &d) < 0 || s[10] != 'T' || digits(s + 11, 2, &h) < 0 ||
	    s[13] != ':' || digits(s + 14, 2, &mi) < 0 || s[16] != ':' || digits(s + 17, 2, &sec) < 0)
		return -1;
	leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap) ||
	    h > 23 || mi > 59 || sec > 59)
		return -1;
	p = s + 19;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (++fdigits > 12)
				return -1;
			if (fdigits <= 3)
				frac = frac * 10 + (*p - '0');
		}
		for (; fdigits < 3; fdigits++)
			frac *= 10;
	}
	if (p[0] == 'Z' && p[1] == '\0') {
		sign = 0;
	} else if ((p[0] == '+' || p[0] == '-') && strlen(p) == 6 && digits(p + 1, 2, &oh) == 0 &&
		   p[3] == ':' && digits(p + 4, 2, &om) == 0 && om <= 59 &&
		   (oh < 14 || (oh == 14 && om == 0))) {
		sign = p[0] == '+' ? 1 : -1;
	} else {
		return -1;
	}
	*ms = ((clock_days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 +
		sec - (int64_t)sign * (oh * 3600 + om * 60)) *
	       1000) +
	      frac;
	return 0;
}

/* ---- signature shape --------------------------------------------------- */

/* Checks SignedInfo before xmlsec sees it: exclusive C14N, RSA/ECDSA with
 * SHA-256, exactly one Reference to "#id" with only the enveloped and
 * exclusive C14N transforms and a SHA-256 digest. Returns NULL when it fits,
 * else the reason. */
static const char *check_signed_info(xmlNodePtr sig, const char *id)
{
	xmlNodePtr si, c, ref = NULL, t;
	const char *alg, *uri;
	int nc14n = 0, nsm = 0, nref = 0, ndm = 0, ndv = 0, ntr = 0, enveloped = 0;

	si = xmlFirstElementChild(sig);
	if (!is_el(si, NS_DSIG, "SignedInfo"))
		return "Signature has no SignedInfo";
	for (c = xmlFirstElementChild(si); c != NULL; c = xmlNextElementSibling(c)) {
		if (is_el(c, NS_DSIG, "CanonicalizationMethod")) {
			alg = attr(c, "Algorithm");
			if (nc14n++ || alg == NULL || strcmp(alg, ALG_EXC_C14N) != 0)
				return "canonicalization method not allowed (exclusive C14N required)";
		} else if (is_el(c, NS_DSIG, "SignatureMethod")) {
			alg = attr(c, "Algorithm");
			if (nsm++ || alg == NULL ||
			    (strcmp(alg, ALG_RSA_SHA256) != 0 && strcmp(alg, ALG_ECDSA_SHA256) != 0))
				return "signature algorithm not allowed (RSA-SHA256 or ECDSA-SHA256 required)";
		} else if (is_el(c, NS_DSIG, "Reference")) {
			nref++;
			ref = c;
		} else {
			return "unexpected element in SignedInfo";
		}
	}
	if (nc14n != 1 || nsm != 1)
		return "SignedInfo is incomplete";
	if (nref != 1)
		return "signature must have exactly one Reference";
	uri = attr(ref, "URI");
	if (uri == NULL || uri[0] != '#' || strcmp(uri + 1, id) != 0)
		return "signature Reference does not point at the Assertion";
	for (c = xmlFirstElementChild(ref); c != NULL; c = xmlNextElementSibling(c)) {
		if (is_el(c, NS_DSIG, "Transforms")) {
			if (ntr++)
				return "Reference has more than one Transforms";
			for (t = xmlFirstElementChild(c); t != NULL; t = xmlNextElementSibling(t)) {
				alg = is_el(t, NS_DSIG, "Transform") ? attr(t, "Algorithm") : NULL;
				if (alg != NULL && strcmp(alg, ALG_ENVELOPED) == 0)
					enveloped++;
				else if (alg == NULL || strcmp(alg, ALG_EXC_C14N) != 0)
					return "Reference transform not allowed";
			}
		} else if (is_el(c, NS_DSIG, "DigestMethod")) {
			alg = attr(c, "Algorithm");
			if (ndm++ || alg == NULL || strcmp(alg, ALG_SHA256) != 0)
				return "digest algorithm not allowed (SHA-256 required)";
		} else if (is_el(c, NS_DSIG, "DigestValue")) {
			ndv++;
		} else {
			return "unexpected element in Reference";
		}
	}
	if (enveloped != 1)
		return "Reference must use the enveloped-signature transform once";
	if (ndm != 1 || ndv != 1)
		return "Reference is incomplete";
	return NULL;
}

/* Verifies sig (a direct child of the root) with the key of the PEM
 * certificate. The algorithm lists are set on the xmlsec context too, so the
 * library enforces what check_signed_info already checked. Returns NULL on a
 * valid signature, else the reason. */
static const char *verify_signature(xmlNodePtr sig, const char *cert_pem)
{
	xmlSecKeyPtr key = NULL;
	xmlSecDSigCtxPtr dsig = NULL;
	const char *why = "signature does not verify";
	size_t plen = strlen(cert_pem);

	if (plen == 0 || plen > UINT_MAX)
		return "IdP certificate is not usable";
	key = xmlSecCryptoAppKeyLoadMemory((const xmlSecByte *)cert_pem, (xmlSecSize)plen,
					   xmlSecKeyDataFormatCertPem, NULL, NULL, NULL);
	if (key == NULL) {
		why = "IdP certificate is not usable";
		goto out;
	}
	dsig = xmlSecDSigCtxCreate(NULL);
	if (dsig == NULL) {
		why = "out of memory";
		goto out;
	}
	if (xmlSecDSigCtxEnableReferenceTransform(dsig, xmlSecTransformEnvelopedId) < 0 ||
	    xmlSecDSigCtxEnableReferenceTransform(dsig, xmlSecTransformExclC14NId) < 0 ||
	    xmlSecDSigCtxEnableReferenceTransform(dsig, xmlSecTransformSha256Id) < 0 ||
	    xmlSecDSigCtxEnableSignatureTransform(dsig, xmlSecTransformExclC14NId) < 0 ||
	    xmlSecDSigCtxEnableSignatureTransform(dsig, xmlSecTransformRsaSha256Id) < 0 ||
	    xmlSecDSigCtxEnableSignatureTransform(dsig, xmlSecTransformEcdsaSha256Id) < 0) {
		why = "out of memory";
		goto out;
	}
	dsig->enabledReferenceUris = xmlSecTransformUriTypeSameDocument;
	dsig->flags |= XMLSEC_DSIG_FLAGS_IGNORE_MANIFESTS;
	/* Setting signKey makes xmlsec ignore <ds:KeyInfo> entirely. */
	dsig->signKey = key;
	key = NULL;
	if (xmlSecDSigCtxVerify(dsig, sig) < 0)
		goto out;
	if (dsig->status != xmlSecDSigStatusSucceeded ||
	    xmlSecPtrListGetSize(&dsig->signedInfoReferences) != 1)
		goto out;
	why = NULL;
out:
	if (dsig != NULL)
		xmlSecDSigCtxDestroy(dsig);
	if (key != NULL)
		xmlSecKeyDestroy(key);
	return why;
}

/* ---- claims ------------------------------------------------------------ */

/* Conditions: validity window and audience. Sets *noa to Conditions'
 * NotOnOrAfter or INT64_MAX. Returns NULL or the reason. */
static const char *check_conditions(xmlNodePtr root, const struct saml_expect *e, int64_t *noa)
{
	xmlNodePtr cond, c, a;
	const char *v, *t;
	int64_t when;
	int restrictions = 0, hit;

	*noa = INT64_MAX;
	if (children_named(root, NS_SAML, "Conditions", &cond) != 1)
		return "Conditions missing";
	if ((v = attr(cond, "NotBefore")) != NULL) {
		if (parse_datetime(v, &when) < 0)
			return "bad Conditions NotBefore";
		if (when > e->now_ms + e->skew_ms)
			return "assertion is not yet valid";
	}
	if ((v = attr(cond, "NotOnOrAfter")) != NULL) {
		if (parse_datetime(v, &when) < 0)
			return "bad Conditions NotOnOrAfter";
		if (e->now_ms - e->skew_ms >= when)
			return "assertion has expired";
		*noa = when;
	}
	for (c = xmlFirstElementChild(cond); c != NULL; c = xmlNextElementSibling(c)) {
		if (is_el(c, NS_SAML, "AudienceRestriction")) {
			restrictions++;
			hit = 0;
			for (a = xmlFirstElementChild(c); a != NULL; a = xmlNextElementSibling(a)) {
				if (!is_el(a, NS_SAML, "Audience"))
					return "malformed AudienceRestriction";
				t = single_text(a);
				if (t != NULL && strcmp(t, e->audience) == 0)
					hit = 1;
			}
			if (!hit)
				return "audience mismatch";
		} else if (!is_el(c, NS_SAML, "OneTimeUse") &&
			   !is_el(c, NS_SAML, "ProxyRestriction")) {
			return "unsupported condition";
		}
	}
	if (restrictions == 0)
		return "audience restriction missing";
	return NULL;
}

/* One SubjectConfirmation already known to be bearer: Recipient and window.
 * Sets *noa. Returns NULL or the reason. */
static const char *check_bearer(xmlNodePtr sc, const struct saml_expect *e, int64_t *noa)
{
	xmlNodePtr scd;
	const char *v;
	int64_t when;

	if (children_named(sc, NS_SAML, "SubjectConfirmationData", &scd) != 1)
		return "bearer confirmation has no SubjectConfirmationData";
	v = attr(scd, "Recipient");
	if (v == NULL || strcmp(v, e->recipient) != 0)
		return "recipient mismatch";
	v = attr(scd, "NotOnOrAfter");
	if (v == NULL)
		return "bearer confirmation has no NotOnOrAfter";
	if (parse_datetime(v, &when) < 0)
		return "bad SubjectConfirmationData NotOnOrAfter";
	if (e->now_ms - e->skew_ms >= when)
		return "subject confirmation has expired";
	*noa = when;
	if ((v = attr(scd, "NotBefore")) != NULL) {
		if (parse_datetime(v, &when) < 0)
			return "bad SubjectConfirmationData NotBefore";
		if (when > e->now_ms + e->skew_ms)
			return "subject confirmation is not yet valid";
	}
	return NULL;
}

/* Subject: NameID into out, and at least one bearer confirmation that fits.
 * Sets *noa from the confirmation that was accepted. */
static const char *check_subject(xmlNodePtr root, const struct saml_expect *e,
				 struct saml_assertion *out, int64_t *noa)
{
	xmlNodePtr subj, nid, c;
	const char *v, *first_why = NULL, *why;
	int bearers = 0;

	if (children_named(root, NS_SAML, "Subject", &subj) != 1)
		return "Subject missing";
	if (children_named(subj, NS_SAML, "NameID", &nid) != 1)
		return "NameID missing";
	v = single_text(nid);
	if (v == NULL)
		return "NameID must be a single text node";
	if (v[0] == '\0')
		return "NameID is empty";
	if (copy_str(out->name_id, sizeof out->name_id, v) < 0)
		return "NameID too long";
	for (c = xmlFirstElementChild(subj); c != NULL; c = xmlNextElementSibling(c)) {
		if (!is_el(c, NS_SAML, "SubjectConfirmation"))
			continue;
		v = attr(c, "Method");
		if (v == NULL || strcmp(v, CM_BEARER) != 0)
			continue;
		bearers++;
		why = check_bearer(c, e, noa);
		if (why == NULL)
			return NULL;
		if (first_why == NULL)
			first_why = why;
	}
	return bearers == 0 ? "bearer subject confirmation missing" : first_why;
}

/* Attribute statements: roles and the optional displayName. */
static const char *read_attributes(xmlNodePtr root, const struct saml_expect *e,
				   struct saml_assertion *out)
{
	xmlNodePtr st, at, val;
	const char *name, *v;
	int is_roles, is_dn;
	json_t *s;

	for (st = xmlFirstElementChild(root); st != NULL; st = xmlNextElementSibling(st)) {
		if (!is_el(st, NS_SAML, "AttributeStatement"))
			continue;
		for (at = xmlFirstElementChild(st); at != NULL; at = xmlNextElementSibling(at)) {
			if (!is_el(at, NS_SAML, "Attribute"))
				continue;
			name = attr(at, "Name");
			if (name == NULL)
				return "Attribute without Name";
			is_roles = e->roles_attribute != NULL &&
				   strcmp(name, e->roles_attribute) == 0;
			is_dn = strcmp(name, "displayName") == 0;
			if (!is_roles && !is_dn)
				continue;
			for (val = xmlFirstElementChild(at); val != NULL;
			     val = xmlNextElementSibling(val)) {
				if (!is_el(val, NS_SAML, "AttributeValue"))
					continue;
				if (val->children == NULL)
					continue;
				v = single_text(val);
				if (v == NULL)
					return is_roles ? "malformed roles attribute"
							: "malformed displayName";
				if (is_roles) {
					s = json_string(v);
					if (s == NULL || json_array_append_new(out->roles, s) < 0)
						return "malformed roles attribute";
				} else if (out->display_name[0] == '\0') {
					copy_utf8_trunc(out->display_name, sizeof out->display_name,
							v);
				}
			}
		}
	}
	return NULL;
}

/* ---- the whole check --------------------------------------------------- */

static int expect_ok(const struct saml_expect *e)
{
	return e != NULL && e->idp_entity_id != NULL && e->idp_cert_pem != NULL &&
	       e->audience != NULL && e->recipient != NULL && e->skew_ms >= 0 &&
	       e->skew_ms <= 24LL * 3600 * 1000 && e->now_ms > 0 && e->now_ms < INT64_MAX / 2;
}

/* What is refused before parsing. */
static const char *check_input(const char *xml, size_t len, const struct saml_expect *e,
			       const struct saml_assertion *out)
{
	if (out == NULL || !expect_ok(e))
		return "SAML is not configured";
	if (!saml_ready)
		return "SAML is not initialised";
	if (xml == NULL || len == 0)
		return "assertion is empty";
	if (len > SAML_MAX_XML)
		return "assertion too large";
	return NULL;
}

/* Parses xml into *doc, refusing DTDs. */
static const char *parse_checked(const char *xml, size_t len, xmlDocPtr *doc)
{
	int dtd = 0;

	*doc = parse_xml(xml, len, &dtd);
	if (dtd || (*doc != NULL && ((*doc)->intSubset != NULL || (*doc)->extSubset != NULL)))
		return "DTDs are not allowed";
	if (*doc == NULL)
		return "assertion is not well-formed XML";
	return NULL;
}

/* The document's shape: one Assertion as the root, version 2.0, with a
 * valid ID (*id, *id_attr), no entities, no other IDs, and exactly one
 * Signature, a child of the root (*sig). */
static const char *check_shape(xmlDocPtr doc, xmlNodePtr root, const char **id, xmlAttrPtr *id_attr,
			       xmlNodePtr *sig)
{
	struct scan sc = {0, 0, 0};
	const char *v;

	if (!is_el(root, NS_SAML, "Assertion"))
		return "root element is not a SAML 2.0 Assertion";
	scan_tree(root, &sc);
	if (sc.entities)
		return "entity references are not allowed";
	if (sc.assertions != 1)
		return "document must contain exactly one Assertion";
	/* The parser registers xml:id attributes as IDs; any such ID could be a
	 * second target for a Reference, so none may exist. */
	if (doc->ids != NULL)
		return "unexpected ID attributes";
	*id_attr = xmlHasNsProp(root, (const xmlChar *)"ID", NULL);
	*id = attr(root, "ID");
	if (*id_attr == NULL || *id == NULL || !valid_id(*id))
		return "Assertion has no valid ID";
	v = attr(root, "Version");
	if (v == NULL || strcmp(v, "2.0") != 0)
		return "Assertion Version must be 2.0";
	if (children_named(root, NS_DSIG, "Signature", sig) == 0)
		return sc.signatures == 0 ? "assertion is not signed"
					  : "Signature is not a child of the Assertion";
	if (sc.signatures != 1)
		return "more than one Signature";
	return NULL;
}

/* Verifies the signature over the root (and only the root) with the IdP's
 * certificate. */
static const char *check_signature(xmlDocPtr doc, xmlNodePtr sig, const char *id,
				   xmlAttrPtr id_attr, const struct saml_expect *e)
{
	const char *why = check_signed_info(sig, id);

	if (why != NULL)
		return why;
	/* Register the root's ID, and only it, so "#id" resolves to the root. */
	if (xmlAddID(NULL, doc, (const xmlChar *)id, id_attr) == NULL ||
	    xmlGetID(doc, (const xmlChar *)id) != id_attr)
		return "Assertion has no valid ID";
	return verify_signature(sig, e->idp_cert_pem);
}

/* The Issuer: one, of entity format, a single text node equal to the
 * expected entity id. */
static const char *read_issuer(xmlNodePtr root, const struct saml_expect *e,
			       struct saml_assertion *out)
{
	xmlNodePtr issuer;
	const char *v;

	if (children_named(root, NS_SAML, "Issuer", &issuer) != 1)
		return "Issuer missing";
	v = attr(issuer, "Format");
	if (v != NULL && strcmp(v, NAMEID_ENTITY) != 0)
		return "Issuer Format must be entity";
	v = single_text(issuer);
	if (v == NULL)
		return "Issuer must be a single text node";
	if (strcmp(v, e->idp_entity_id) != 0)
		return "issuer mismatch";
	if (copy_str(out->issuer, sizeof out->issuer, v) < 0)
		return "Issuer too long";
	return NULL;
}

/* What a verified assertion says: issuer, conditions, subject, roles. Only
 * the root's own subtree is read. */
static const char *read_verified(xmlNodePtr root, const char *id, const struct saml_expect *e,
				 struct saml_assertion *out)
{
	int64_t cond_noa, scd_noa = INT64_MAX;
	const char *why;

	if (copy_str(out->id, sizeof out->id, id) < 0)
		return "Assertion has no valid ID";
	if ((why = read_issuer(root, e, out)) != NULL ||
	    (why = check_conditions(root, e, &cond_noa)) != NULL ||
	    (why = check_subject(root, e, out, &scd_noa)) != NULL)
		return why;
	out->not_on_or_after_ms = cond_noa < scd_noa ? cond_noa : scd_noa;
	out->roles = json_array();
	if (out->roles == NULL)
		return "out of memory";
	return read_attributes(root, e, out);
}

int saml_verify(const char *xml, size_t len, const struct saml_expect *e,
		struct saml_assertion *out, char *err, size_t errcap)
{
	xmlGenericErrorFunc old_gen = xmlGenericError;
	void *old_gen_ctx = xmlGenericErrorContext;
	xmlStructuredErrorFunc old_st = xmlStructuredError;
	void *old_st_ctx = xmlStructuredErrorContext;
	xmlDocPtr doc = NULL;
	xmlNodePtr root = NULL, sig = NULL;
	xmlAttrPtr id_attr = NULL;
	const char *why, *id = NULL;

	if (out != NULL)
		memset(out, 0, sizeof *out);
	xmlSetGenericErrorFunc(NULL, quiet_generic);
	xmlSetStructuredErrorFunc(NULL, quiet_structured);
	if ((why = check_input(xml, len, e, out)) == NULL &&
	    (why = parse_checked(xml, len, &doc)) == NULL &&
	    (why = check_shape(doc, root = xmlDocGetRootElement(doc), &id, &id_attr, &sig)) == NULL &&
	    (why = check_signature(doc, sig, id, id_attr, e)) == NULL)
		why = read_verified(root, id, e, out);
	if (doc != NULL)
		xmlFreeDoc(doc);
	xmlSetStructuredErrorFunc(old_st_ctx, old_st);
	xmlSetGenericErrorFunc(old_gen_ctx, old_gen);
	if (why != NULL && out != NULL) {
		saml_assertion_free(out);
		memset(out, 0, sizeof *out);
	}
	if (err != NULL && errcap > 0)
		snprintf(err, errcap, "%s", why ? why : "");
	return why ? -1 : 0;
}

int saml_peek_issuer(const char *xml, size_t len, char *out, size_t cap)
{
	xmlGenericErrorFunc old_gen = xmlGenericError;
	void *old_gen_ctx = xmlGenericErrorContext;
	xmlStructuredErrorFunc old_st = xmlStructuredError;
	void *old_st_ctx = xmlStructuredErrorContext;
	xmlDocPtr doc = NULL;
	xmlNodePtr root, issuer;
	const char *v;
	int dtd = 0, rc = -1;

	if (!xml || !len || len > SAML_MAX_XML || !saml_ready)
		return -1;
	xmlSetGenericErrorFunc(NULL, quiet_generic);
	xmlSetStructuredErrorFunc(NULL, quiet_structured);
	doc = parse_xml(xml, len, &dtd);
	if (!doc || dtd)
		goto out;
	root = xmlDocGetRootElement(doc);
	if (!is_el(root, NS_SAML, "Assertion") ||
	    children_named(root, NS_SAML, "Issuer", &issuer) != 1)
		goto out;
	v = single_text(issuer);
	if (v && copy_str(out, cap, v) == 0)
		rc = 0;
out:
	if (doc)
		xmlFreeDoc(doc);
	xmlSetGenericErrorFunc(old_gen_ctx, old_gen);
	xmlSetStructuredErrorFunc(old_st_ctx, old_st);
	return rc;
}
