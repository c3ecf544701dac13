/* Unit tests for saml: signed SAML 2.0 assertion verification.
 *
 * Group setup makes a temporary directory, creates an IdP key and
 * certificate and an attacker's pair with the openssl CLI, writes assertion
 * templates and signs them with the xmlsec1 CLI. Each test then feeds one
 * document (or a doctored copy) to saml_verify and checks the exact result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <cmocka.h>

#include "core/buf.h"
#include "identity/saml.h"

#define NOW_MS 1717243200000LL /* 2024-06-01T12:00:00Z */
#define IDP "https://idp.example.com/metadata"
#define AUDIENCE "https://revops.example.com/saml/sp"
#define RECIPIENT "https://revops.example.com/oauth/token"
#define BEARER "urn:oasis:names:tc:SAML:2.0:cm:bearer"
#define RSA_SHA256 "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
#define ECDSA_SHA256 "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256"
#define RSA_SHA1 "http://www.w3.org/2000/09/xmldsig#rsa-sha1"
#define SHA256 "http://www.w3.org/2001/04/xmlenc#sha256"
#define SHA1 "http://www.w3.org/2000/09/xmldsig#sha1"

/* What goes into one assertion template. */
struct tmpl {
	const char *id;
	const char *issuer;
	const char *name_id; /* raw XML content of NameID */
	const char *method;
	const char *recipient;
	const char *scd_not_on_or_after;
	const char *not_before;
	const char *not_on_or_after;
	const char *audience;
	const char *sig_alg;
	const char *digest_alg;
	const char *ref_uri;
	int sig_where; /* 0 none, 1 child of the root, 2 inside Subject */
};

/* Signed (or unsigned) documents made once in group setup. */
static struct {
	char dir[64];
	char *cert;    /* IdP certificate PEM */
	char *ec_cert; /* an ECDSA P-256 IdP certificate PEM */
	char *ecdsa;   /* valid, signed with ECDSA-SHA256 */
	char *valid;
	char *offset_times; /* times with offsets and fractions */
	char *expired;
	char *not_yet;
	char *scd_expired;
	char *wrong_audience;
	char *wrong_recipient;
	char *wrong_issuer;
	char *unsigned_doc;
	char *attacker;
	char *comment_nameid;
	char *sha1;
	char *sha1_digest;
	char *holder_of_key;
	char *sig_in_subject;
	char *whole_doc_ref;
	char *evil_unsigned; /* an unsigned assertion body, no XML declaration */
} fx;

static struct tmpl base(void)
{
	struct tmpl t = {
		.id = "_abc",
		.issuer = IDP,
		.name_id = "alice@example.com",
		.method = BEARER,
		.recipient = RECIPIENT,
		.scd_not_on_or_after = "2024-06-01T12:05:00Z",
		.not_before = "2024-06-01T11:59:00Z",
		.not_on_or_after = "2024-06-01T12:10:00Z",
		.audience = AUDIENCE,
		.sig_alg = RSA_SHA256,
		.digest_alg = SHA256,
		.ref_uri = "#_abc",
		.sig_where = 1,
	};
	return t;
}

static void sig_template(struct buf *b, const struct tmpl *t)
{
	assert_int_equal(
		buf_printf(b,
			   "<ds:Signature xmlns:ds=\"http://www.w3.org/2000/09/xmldsig#\"><ds:SignedInfo>"
			   "<ds:CanonicalizationMethod Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"/>"
			   "<ds:SignatureMethod Algorithm=\"%s\"/>"
			   "<ds:Reference URI=\"%s\"><ds:Transforms>"
			   "<ds:Transform Algorithm=\"http://www.w3.org/2000/09/xmldsig#enveloped-signature\"/>"
			   "<ds:Transform Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"/>"
			   "</ds:Transforms><ds:DigestMethod Algorithm=\"%s\"/><ds:DigestValue></ds:DigestValue>"
			   "</ds:Reference></ds:SignedInfo><ds:SignatureValue></ds:SignatureValue>"
			   "<ds:KeyInfo><ds:X509Data/></ds:KeyInfo></ds:Signature>\n",
			   t->sig_alg, t->ref_uri, t->digest_alg),
		0);
}

/* The assertion body for t, without an XML declaration; malloc'd. */
static char *assertion_body(const struct tmpl *t)
{
	struct buf b;

	buf_init(&b, 0);
	assert_int_equal(buf_printf(&b,
				    "<saml:Assertion xmlns:saml=\"urn:oasis:names:tc:SAML:2.0:assertion\" "
				    "ID=\"%s\" Version=\"2.0\" IssueInstant=\"2024-06-01T11:59:30Z\">\n"
				    "  <saml:Issuer>%s</saml:Issuer>\n  ",
				    t->id, t->issuer),
			 0);
	if (t->sig_where == 1)
		sig_template(&b, t);
	assert_int_equal(
		buf_printf(&b,
			   "  <saml:Subject>\n"
			   "    <saml:NameID Format=\"urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress\">%s</saml:NameID>\n",
			   t->name_id),
		0);
	if (t->sig_where == 2)
		sig_template(&b, t);
	assert_int_equal(
		buf_printf(
			&b,
			"    <saml:SubjectConfirmation Method=\"%s\">\n"
			"      <saml:SubjectConfirmationData NotOnOrAfter=\"%s\" Recipient=\"%s\"/>\n"
			"    </saml:SubjectConfirmation>\n"
			"  </saml:Subject>\n"
			"  <saml:Conditions NotBefore=\"%s\" NotOnOrAfter=\"%s\">\n"
			"    <saml:AudienceRestriction><saml:Audience>%s</saml:Audience></saml:AudienceRestriction>\n"
			"  </saml:Conditions>\n"
			"  <saml:AuthnStatement AuthnInstant=\"2024-06-01T11:59:30Z\"><saml:AuthnContext>"
			"<saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"
			"</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>\n"
			"  <saml:AttributeStatement>\n"
			"    <saml:Attribute Name=\"roles\"><saml:AttributeValue>revenue-approver</saml:AttributeValue></saml:Attribute>\n"
			"    <saml:Attribute Name=\"displayName\"><saml:AttributeValue>Alice Example</saml:AttributeValue></saml:Attribute>\n"
			"  </saml:AttributeStatement>\n"
			"</saml:Assertion>\n",
			t->method, t->scd_not_on_or_after, t->recipient, t->not_before,
			t->not_on_or_after, t->audience),
		0);
	return buf_steal(&b);
}

static char *read_file(const char *path)
{
	struct buf b;
	char chunk[4096];
	size_t n;
	FILE *f = fopen(path, "rb");

	assert_non_null(f);
	buf_init(&b, 0);
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		assert_int_equal(buf_append(&b, chunk, n), 0);
	fclose(f);
	if (b.data == NULL)
		assert_int_equal(buf_puts(&b, ""), 0);
	return buf_steal(&b);
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(s, 1, strlen(s), f), strlen(s));
	assert_int_equal(fclose(f), 0);
}

static void run(const char *cmd)
{
	assert_int_equal(system(cmd), 0);
}

/* Writes t as name.tmpl.xml and, when it has a signature template, signs it
 * with the key pair who ("idp" or "attacker"). Returns the document. */
static char *make(const char *name, const struct tmpl *t, const char *who)
{
	char path[256], out[256], cmd[1024];
	char *body = assertion_body(t);
	struct buf doc;

	buf_init(&doc, 0);
	assert_int_equal(buf_printf(&doc, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n%s", body), 0);
	free(body);
	snprintf(path, sizeof path, "%s/%s.tmpl.xml", fx.dir, name);
	write_file(path, doc.data);
	if (t->sig_where == 0)
		return buf_steal(&doc);
	buf_free(&doc);
	snprintf(out, sizeof out, "%s/%s.xml", fx.dir, name);
	snprintf(cmd, sizeof cmd,
		 "xmlsec1 --sign --privkey-pem '%s/%s.key,%s/%s.pem' "
		 "--id-attr:ID urn:oasis:names:tc:SAML:2.0:assertion:Assertion "
		 "--output '%s' '%s' 2>/dev/null",
		 fx.dir, who, fx.dir, who, out, path);
	run(cmd);
	return read_file(out);
}

/* A copy of s with the first occurrence of from replaced by to. */
static char *replace(const char *s, const char *from, const char *to)
{
	const char *at = strstr(s, from);
	struct buf b;

	assert_non_null(at);
	buf_init(&b, 0);
	assert_int_equal(buf_append(&b, s, (size_t)(at - s)), 0);
	assert_int_equal(buf_puts(&b, to), 0);
	assert_int_equal(buf_puts(&b, at + strlen(from)), 0);
	return buf_steal(&b);
}

/* s without its leading XML declaration line. */
static const char *body_of(const char *s)
{
	const char *p = strstr(s, "?>");

	assert_non_null(p);
	p += 2;
	while (*p == '\n')
		p++;
	return p;
}

static int group_setup(void **state)
{
	char cmd[1024];
	struct tmpl t;

	(void)state;
	strcpy(fx.dir, "/tmp/test_saml.XXXXXX");
	if (mkdtemp(fx.dir) == NULL)
		return -1;
	snprintf(cmd, sizeof cmd,
		 "cd '%s' && for who in idp attacker; do "
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout $who.key -out $who.pem "
		 "-days 3650 -subj /CN=$who >/dev/null 2>&1 || exit 1; done; "
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
		 "-keyout ec.key -out ec.pem -days 3650 -subj /CN=ec >/dev/null 2>&1",
		 fx.dir);
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof cmd, "%s/idp.pem", fx.dir);
	fx.cert = read_file(cmd);
	snprintf(cmd, sizeof cmd, "%s/ec.pem", fx.dir);
	fx.ec_cert = read_file(cmd);
	if (saml_global_init() < 0)
		return -1;

	t = base();
	fx.valid = make("valid", &t, "idp");
	t.sig_alg = ECDSA_SHA256;
	fx.ecdsa = make("ecdsa", &t, "ec");
	t = base();
	t.not_before = "2024-06-01T13:59:00.5+02:00";
	t.not_on_or_after = "2024-06-01T07:10:00.1234567-04:50";
	t.scd_not_on_or_after = "2024-06-01T12:20:00.250Z";
	fx.offset_times = make("offset_times", &t, "idp");
	t = base();
	t.not_before = "2024-06-01T11:50:00Z";
	t.not_on_or_after = "2024-06-01T11:57:59Z";
	fx.expired = make("expired", &t, "idp");
	t = base();
	t.not_before = "2024-06-01T12:02:01Z";
	fx.not_yet = make("not_yet", &t, "idp");
	t = base();
	t.scd_not_on_or_after = "2024-06-01T11:58:00Z";
	fx.scd_expired = make("scd_expired", &t, "idp");
	t = base();
	t.audience = "https://other.example.com/saml/sp";
	fx.wrong_audience = make("wrong_audience", &t, "idp");
	t = base();
	t.recipient = "https://other.example.com/oauth/token";
	fx.wrong_recipient = make("wrong_recipient", &t, "idp");
	t = base();
	t.issuer = "https://evil-idp.example.com/metadata";
	fx.wrong_issuer = make("wrong_issuer", &t, "idp");
	t = base();
	t.sig_where = 0;
	fx.unsigned_doc = make("unsigned", &t, "idp");
	t = base();
	fx.attacker = make("attacker", &t, "attacker");
	t = base();
	t.name_id = "admin@x.com<!---->.evil.com";
	fx.comment_nameid = make("comment_nameid", &t, "idp");
	t = base();
	t.sig_alg = RSA_SHA1;
	t.digest_alg = SHA1;
	fx.sha1 = make("sha1", &t, "idp");
	t = base();
	t.digest_alg = SHA1;
	fx.sha1_digest = make("sha1_digest", &t, "idp");
	t = base();
	t.method = "urn:oasis:names:tc:SAML:2.0:cm:holder-of-key";
	fx.holder_of_key = make("holder_of_key", &t, "idp");
	t = base();
	t.sig_where = 2;
	fx.sig_in_subject = make("sig_in_subject", &t, "idp");
	t = base();
	t.ref_uri = "";
	fx.whole_doc_ref = make("whole_doc_ref", &t, "idp");
	t = base();
	t.id = "_evil";
	t.name_id = "evil@attacker.example";
	t.sig_where = 0;
	fx.evil_unsigned = assertion_body(&t);
	return 0;
}

static int group_teardown(void **state)
{
	char cmd[256];
	char **docs[] = {
		&fx.cert,           &fx.ec_cert,         &fx.ecdsa,         &fx.valid,
		&fx.offset_times,   &fx.expired,         &fx.not_yet,       &fx.scd_expired,
		&fx.wrong_audience, &fx.wrong_recipient, &fx.wrong_issuer,  &fx.unsigned_doc,
		&fx.attacker,       &fx.comment_nameid,  &fx.sha1,          &fx.sha1_digest,
		&fx.holder_of_key,  &fx.sig_in_subject,  &fx.whole_doc_ref, &fx.evil_unsigned};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof docs / sizeof docs[0]; i++) {
		free(*docs[i]);
		*docs[i] = NULL;
	}
	saml_global_cleanup();
	if (fx.dir[0] != '\0') {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx.dir);
		if (system(cmd) != 0)
			return -1;
	}
	return 0;
}

static struct saml_expect expect(void)
{
	struct saml_expect e = {
		.idp_entity_id = IDP,
		.idp_cert_pem = fx.cert,
		.audience = AUDIENCE,
		.recipient = RECIPIENT,
		.now_ms = NOW_MS,
		.skew_ms = 120000,
		.roles_attribute = "roles",
	};
	return e;
}

/* Expects xml (len bytes) to be refused with exactly reason. */
static void reject_n(const char *xml, size_t len, const char *reason)
{
	struct saml_expect e = expect();
	struct saml_assertion a;
	char err[160];

	strcpy(err, "unset");
	assert_int_equal(saml_verify(xml, len, &e, &a, err, sizeof err), -1);
	assert_string_equal(err, reason);
	assert_null(a.roles);
	assert_string_equal(a.name_id, "");
	saml_assertion_free(&a);
}

static void reject(const char *xml, const char *reason)
{
	reject_n(xml, strlen(xml), reason);
}

static void test_valid(void **state)
{
	struct saml_expect e = expect();
	struct saml_assertion a;
	char err[160];

	(void)state;
	assert_int_equal(saml_verify(fx.valid, strlen(fx.valid), &e, &a, err, sizeof err), 0);
	assert_string_equal(err, "");
	assert_string_equal(a.id, "_abc");
	assert_string_equal(a.name_id, "alice@example.com");
	assert_string_equal(a.issuer, IDP);
	assert_string_equal(a.display_name, "Alice Example");
	/* earliest of Conditions (12:10) and SubjectConfirmationData (12:05) */
	assert_int_equal(a.not_on_or_after_ms, NOW_MS + 5 * 60 * 1000);
	assert_non_null(a.roles);
	assert_int_equal(json_array_size(a.roles), 1);
	assert_string_equal(json_string_value(json_array_get(a.roles, 0)), "revenue-approver");
	saml_assertion_free(&a);
	assert_null(a.roles);
}

static void test_ecdsa_valid(void **state)
{
	struct saml_expect e = expect();
	struct saml_assertion a;
	char err[160];

	(void)state;
	e.idp_cert_pem = fx.ec_cert;
	assert_int_equal(saml_verify(fx.ecdsa, strlen(fx.ecdsa), &e, &a, err, sizeof err), 0);
	assert_string_equal(a.name_id, "alice@example.com");
	saml_assertion_free(&a);
	/* The RSA IdP certificate does not verify an ECDSA signature. */
	reject(fx.ecdsa, "signature does not verify");
}

static void test_valid_within_skew(void **state)
{
	struct saml_expect e = expect();
	struct saml_assertion a;
	char err[160];

	(void)state;
	/* 12:06:59 is past SubjectConfirmationData's 12:05 but within 2 min. */
	e.now_ms = NOW_MS + 6 * 60 * 1000 + 59 * 1000;
	assert_int_equal(saml_verify(fx.valid, strlen(fx.valid), &e, &a, err, sizeof err), 0);
	saml_assertion_free(&a);
	e.now_ms = NOW_MS + 7 * 60 * 1000;
	assert_int_equal(saml_verify(fx.valid, strlen(fx.valid), &e, &a, err, sizeof err), -1);
	assert_string_equal(err, "subject confirmation has expired");
}

static void test_datetime_offsets_and_fractions(void **state)
{
	struct saml_expect e = expect();
	struct saml_assertion a;
	char err[160];

	(void)state;
	/* NotBefore 13:59:00.5+02:00 = 11:59:00.500Z; NotOnOrAfter
	 * 07:10:00.1234567-04:50 = 12:00:00.123Z; SCD 12:20:00.250Z. */
	assert_int_equal(saml_verify(fx.offset_times, strlen(fx.offset_times), &e, &a, err,
				     sizeof err),
			 0);
	assert_int_equal(a.not_on_or_after_ms, NOW_MS + 123);
	saml_assertion_free(&a);
	e.now_ms = NOW_MS + 123 + 120000;
	assert_int_equal(saml_verify(fx.offset_times, strlen(fx.offset_times), &e, &a, err,
				     sizeof err),
			 -1);
	assert_string_equal(err, "assertion has expired");
	e.now_ms = NOW_MS + 123 + 119999;
	assert_int_equal(saml_verify(fx.offset_times, strlen(fx.offset_times), &e, &a, err,
				     sizeof err),
			 0);
	saml_assertion_free(&a);
}

static void test_expired(void **state)
{
	(void)state;
	reject(fx.expired, "assertion has expired");
}

static void test_not_yet_valid(void **state)
{
	(void)state;
	reject(fx.not_yet, "assertion is not yet valid");
}

static void test_subject_confirmation_expired(void **state)
{
	(void)state;
	reject(fx.scd_expired, "subject confirmation has expired");
}

static void test_wrong_audience(void **state)
{
	(void)state;
	reject(fx.wrong_audience, "audience mismatch");
}

static void test_wrong_recipient(void **state)
{
	(void)state;
	reject(fx.wrong_recipient, "recipient mismatch");
}

static void test_wrong_issuer(void **state)
{
	(void)state;
	reject(fx.wrong_issuer, "issuer mismatch");
}

static void test_missing_signature(void **state)
{
	(void)state;
	reject(fx.unsigned_doc, "assertion is not signed");
}

static void test_attacker_key(void **state)
{
	(void)state;
	reject(fx.attacker, "signature does not verify");
}

static void test_wrong_trusted_cert(void **state)
{
	struct saml_expect e = expect();
	struct saml_assertion a;
	char err[160], path[256];
	char *attacker_cert;

	(void)state;
	snprintf(path, sizeof path, "%s/attacker.pem", fx.dir);
	attacker_cert = read_file(path);
	e.idp_cert_pem = attacker_cert;
	assert_int_equal(saml_verify(fx.valid, strlen(fx.valid), &e, &a, err, sizeof err), -1);
	assert_string_equal(err, "signature does not verify");
	e.idp_cert_pem = "-----BEGIN CERTIFICATE-----\nnot a cert\n-----END CERTIFICATE-----\n";
	assert_int_equal(saml_verify(fx.valid, strlen(fx.valid), &e, &a, err, sizeof err), -1);
	assert_string_equal(err, "IdP certificate is not usable");
	free(attacker_cert);
}

static void test_tampered_nameid(void **state)
{
	char *doc = replace(fx.valid, "alice@example.com", "mallory@example.com");

	(void)state;
	reject(doc, "signature does not verify");
	free(doc);
}

static void test_tampered_role(void **state)
{
	char *doc = replace(fx.valid, "revenue-approver", "finance-operator");

	(void)state;
	reject(doc, "signature does not verify");
	free(doc);
}

static void test_comment_injected_nameid(void **state)
{
	char cmd[512];

	(void)state;
	/* The signature itself is valid (comments are not signed)... */
	snprintf(cmd, sizeof cmd,
		 "xmlsec1 --verify --pubkey-cert-pem '%s/idp.pem' "
		 "--id-attr:ID urn:oasis:names:tc:SAML:2.0:assertion:Assertion "
		 "'%s/comment_nameid.xml' >/dev/null 2>&1",
		 fx.dir, fx.dir);
	run(cmd);
	/* ...and the single-text-node rule still refuses it. */
	reject(fx.comment_nameid, "NameID must be a single text node");
}

static void test_cdata_nameid(void **state)
{
	char *doc = replace(fx.valid, "alice@example.com", "<![CDATA[alice@example.com]]>");

	(void)state;
	/* Canonically the same text, so the digest still matches. */
	reject(doc, "NameID must be a single text node");
	free(doc);
}

/* The signed assertion inside <Advice> of a new, unsigned root. */
static void test_wrap_signed_inside_evil_root(void **state)
{
	struct buf b;
	char *doc;

	(void)state;
	doc = replace(fx.evil_unsigned, "  <saml:AuthnStatement",
		      "  <saml:Advice>SIGNED</saml:Advice>\n  <saml:AuthnStatement");
	buf_init(&b, 0);
	assert_int_equal(buf_puts(&b, doc), 0);
	free(doc);
	doc = replace(b.data, "SIGNED", body_of(fx.valid));
	buf_free(&b);
	reject(doc, "document must contain exactly one Assertion");
	free(doc);
}

/* The same with the signed copy's ID on the evil root too. */
static void test_wrap_evil_root_same_id(void **state)
{
	char *a = replace(fx.evil_unsigned, "ID=\"_evil\"", "ID=\"_abc\"");
	char *b = replace(
		a, "</saml:Assertion>",
		"<ext:Extensions xmlns:ext=\"urn:example:ext\">SIGNED</ext:Extensions></saml:Assertion>");
	char *doc = replace(b, "SIGNED", body_of(fx.valid));

	(void)state;
	reject(doc, "document must contain exactly one Assertion");
	free(a);
	free(b);
	free(doc);
}

/* The signed assertion stays the root; an evil one is nested in it. */
static void test_wrap_evil_inside_signed_root(void **state)
{
	struct buf b;
	char *doc;

	(void)state;
	buf_init(&b, 0);
	assert_int_equal(buf_printf(&b, "<saml:Advice>%s</saml:Advice></saml:Assertion>",
				    fx.evil_unsigned),
			 0);
	doc = replace(fx.valid, "</saml:Assertion>", b.data);
	buf_free(&b);
	reject(doc, "document must contain exactly one Assertion");
	free(doc);
}

/* The signed assertion inside a protocol Response. */
static void test_wrap_in_response(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b, 0);
	assert_int_equal(
		buf_printf(&b,
			   "<samlp:Response xmlns:samlp=\"urn:oasis:names:tc:SAML:2.0:protocol\" ID=\"_r\" "
			   "Version=\"2.0\" IssueInstant=\"2024-06-01T11:59:30Z\">%s</samlp:Response>",
			   body_of(fx.valid)),
		0);
	reject(b.data, "root element is not a SAML 2.0 Assertion");
	buf_free(&b);
}

static void test_signature_not_child_of_root(void **state)
{
	(void)state;
	reject(fx.sig_in_subject, "Signature is not a child of the Assertion");
}

static void test_reference_must_name_root(void **state)
{
	(void)state;
	reject(fx.whole_doc_ref, "signature Reference does not point at the Assertion");
}

static void test_second_signature(void **state)
{
	const char *s = strstr(fx.valid, "<ds:Signature");
	const char *end = strstr(fx.valid, "</ds:Signature>");
	struct buf sig, doc;
	char *d;

	(void)state;
	assert_non_null(s);
	assert_non_null(end);
	buf_init(&sig, 0);
	assert_int_equal(buf_append(&sig, s, (size_t)(end - s) + strlen("</ds:Signature>")), 0);
	buf_init(&doc, 0);
	assert_int_equal(buf_printf(&doc, "<saml:Advice>%s</saml:Advice></saml:Assertion>", sig.data),
			 0);
	d = replace(fx.valid, "</saml:Assertion>", doc.data);
	reject(d, "more than one Signature");
	free(d);
	buf_free(&sig);
	buf_free(&doc);
}

static void test_xml_id_rejected(void **state)
{
	char *doc = replace(fx.valid, "<saml:NameID ", "<saml:NameID xml:id=\"_abc\" ");

	(void)state;
	reject(doc, "unexpected ID attributes");
	free(doc);
}

static void test_doctype_external_entity(void **state)
{
	struct buf b;
	char *doc;

	(void)state;
	doc = replace(body_of(fx.valid), "alice@example.com", "&xxe;");
	buf_init(&b, 0);
	assert_int_equal(buf_printf(&b,
				    "<?xml version=\"1.0\"?>\n<!DOCTYPE saml:Assertion [\n"
				    "<!ENTITY xxe SYSTEM \"file:///etc/passwd\">\n]>\n%s",
				    doc),
			 0);
	reject(b.data, "DTDs are not allowed");
	buf_free(&b);
	free(doc);
}

static void test_doctype_variants(void **state)
{
	static const char *const heads[] = {
		"<!DOCTYPE saml:Assertion SYSTEM \"http://127.0.0.1:9/evil.dtd\">\n",
		"<!DOCTYPE saml:Assertion>\n",
		"<!DOCTYPE a [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]>\n",
		"<!DOCTYPE saml:Assertion [<!ATTLIST saml:NameID ID ID #IMPLIED>]>\n",
	};
	struct buf b;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof heads / sizeof heads[0]; i++) {
		buf_init(&b, 0);
		assert_int_equal(buf_printf(&b, "<?xml version=\"1.0\"?>\n%s%s", heads[i],
					    body_of(fx.valid)),
				 0);
		reject(b.data, "DTDs are not allowed");
		buf_free(&b);
	}
}

static void test_undeclared_entity(void **state)
{
	char *doc = replace(fx.valid, "alice@example.com", "&xxe;");

	(void)state;
	reject(doc, "assertion is not well-formed XML");
	free(doc);
}

static void test_sha1_signature(void **state)
{
	(void)state;
	reject(fx.sha1, "signature algorithm not allowed (RSA-SHA256 or ECDSA-SHA256 required)");
}

static void test_sha1_digest(void **state)
{
	(void)state;
	reject(fx.sha1_digest, "digest algorithm not allowed (SHA-256 required)");
}

static void test_oversized(void **state)
{
	size_t n = SAML_MAX_XML + 1;
	size_t vlen = strlen(fx.valid);
	char *doc = malloc(n);

	(void)state;
	assert_non_null(doc);
	assert_true(vlen < n);
	memcpy(doc, fx.valid, vlen);
	memset(doc + vlen, ' ', n - vlen);
	reject_n(doc, n, "assertion too large");
	/* Trailing whitespace itself is fine: one byte under the cap verifies. */
	{
		struct saml_expect e = expect();
		struct saml_assertion a;
		char err[160];

		assert_int_equal(saml_verify(doc, n - 1, &e, &a, err, sizeof err), 0);
		saml_assertion_free(&a);
	}
	free(doc);
}

static void test_bearer_missing(void **state)
{
	(void)state;
	reject(fx.holder_of_key, "bearer subject confirmation missing");
}

static void test_garbage(void **state)
{
	(void)state;
	reject_n("", 0, "assertion is empty");
	reject("not xml at all", "assertion is not well-formed XML");
	reject_n("<a>\0</a>", 8, "assertion is not well-formed XML");
	reject("<a xmlns=\"urn:oasis:names:tc:SAML:2.0:assertion\"/>",
	       "root element is not a SAML 2.0 Assertion");
	reject("<Assertion xmlns=\"urn:oasis:names:tc:SAML:2.0:assertion\" ID=\"1bad\" Version=\"2.0\"/>",
	       "Assertion has no valid ID");
}

static void test_error_buffer_small_and_no_echo(void **state)
{
	struct saml_expect e = expect();
	struct saml_assertion a;
	char err[8];
	char *doc = replace(fx.valid, "alice@example.com", "mallory@example.com");

	(void)state;
	assert_int_equal(saml_verify(doc, strlen(doc), &e, &a, err, sizeof err), -1);
	assert_string_equal(err, "signatu");
	assert_int_equal(saml_verify(doc, strlen(doc), &e, &a, NULL, 0), -1);
	free(doc);
}

static void *verify_many(void *arg)
{
	struct saml_expect e = expect();
	struct saml_assertion a;
	char err[160];
	int i;
	long bad = 0;

	(void)arg;
	for (i = 0; i < 25; i++) {
		if (saml_verify(fx.valid, strlen(fx.valid), &e, &a, err, sizeof err) != 0 ||
		    strcmp(a.name_id, "alice@example.com") != 0)
			bad++;
		saml_assertion_free(&a);
		if (saml_verify(fx.attacker, strlen(fx.attacker), &e, &a, err, sizeof err) != -1)
			bad++;
	}
	return (void *)bad;
}

static void test_threads(void **state)
{
	pthread_t th[4];
	void *bad;
	size_t i;

	(void)state;
	for (i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, verify_many, NULL), 0);
	for (i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], &bad), 0);
		assert_null(bad);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_ecdsa_valid),
		cmocka_unit_test(test_valid_within_skew),
		cmocka_unit_test(test_datetime_offsets_and_fractions),
		cmocka_unit_test(test_expired),
		cmocka_unit_test(test_not_yet_valid),
		cmocka_unit_test(test_subject_confirmation_expired),
		cmocka_unit_test(test_wrong_audience),
		cmocka_unit_test(test_wrong_recipient),
		cmocka_unit_test(test_wrong_issuer),
		cmocka_unit_test(test_missing_signature),
		cmocka_unit_test(test_attacker_key),
		cmocka_unit_test(test_wrong_trusted_cert),
		cmocka_unit_test(test_tampered_nameid),
		cmocka_unit_test(test_tampered_role),
		cmocka_unit_test(test_comment_injected_nameid),
		cmocka_unit_test(test_cdata_nameid),
		cmocka_unit_test(test_wrap_signed_inside_evil_root),
		cmocka_unit_test(test_wrap_evil_root_same_id),
		cmocka_unit_test(test_wrap_evil_inside_signed_root),
		cmocka_unit_test(test_wrap_in_response),
		cmocka_unit_test(test_signature_not_child_of_root),
		cmocka_unit_test(test_reference_must_name_root),
		cmocka_unit_test(test_second_signature),
		cmocka_unit_test(test_xml_id_rejected),
		cmocka_unit_test(test_doctype_external_entity),
		cmocka_unit_test(test_doctype_variants),
		cmocka_unit_test(test_undeclared_entity),
		cmocka_unit_test(test_sha1_signature),
		cmocka_unit_test(test_sha1_digest),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_bearer_missing),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_error_buffer_small_and_no_echo),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
