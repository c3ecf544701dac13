/* libFuzzer driver for the parsers of POST /oauth/token (oauth.h) and of
 * bearer credentials (auth.h), fed as the endpoint is: the input's first
 * line is an Authorization header value, the rest the form body.
 *  - The header goes to oauth_basic_credentials (client authentication)
 *    and auth_bearer (every bearer route).
 *  - The body goes to form_parse; its "scope" to oauth_scope_parse, once
 *    for a client allowed everything and once for one allowed two scopes
 *    and two property codes; its "assertion" to oauth_assertion_decode and
 *    the decoded XML to saml_peek_issuer, as a saml2-bearer grant does.
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise is broken: Basic credentials come as both id and secret or
 * neither; a bearer token is non-empty, unpadded and fits; an accepted
 * scope asks only for what is allowed, holds every property code the
 * request named (once, at most AUTH_MAX_PROPS) and no other, and names
 * every scope it asked for; a scope of allowed names only is accepted; a
 * decoded assertion is at most SAML_MAX_XML bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/identity/oauth.h"
#include "core/form.h"
#include "identity/auth.h"
#include "identity/saml.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (saml_global_init() < 0)
		abort();
	return 0;
}

static void check_header(const char *h)
{
	char *id = NULL, *secret = NULL, token[AUTH_TOKEN_MAX];
	size_t n;

	if (oauth_basic_credentials(h, &id, &secret) == 0) {
		if (!id || !secret)
			abort();
	} else if (id || secret) {
		abort();
	}
	free(id);
	free(secret);
	if (auth_bearer(h, token, sizeof token) == AUTH_OK) {
		n = strlen(token);
		if (n == 0 || n >= sizeof token || token[0] == ' ' || token[n - 1] == ' ')
			abort();
	}
}

static int code_listed(const json_t *codes, const char *code)
{
	size_t i;
	json_t *v;

	json_array_foreach(codes, i, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), code))
			return 1;
	return 0;
}

/* Checks one parse of scope for a client allowed `allowed` and `codes`. */
static void check_scope(const char *scope, unsigned allowed, const json_t *codes)
{
	json_t *want_codes = json_array(), *v;
	char *copy = NULL, *tok, *save = NULL, names[512];
	unsigned want = 0, again = 0, bit;
	int rc, only_allowed_names = 1;
	size_t i, j;

	if (!want_codes)
		return;
	rc = oauth_scope_parse(scope, allowed, codes, &want, want_codes);
	copy = strdup(scope ? scope : "");
	if (!copy)
		goto out;
	for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (!strncmp(tok, "property:", 9) && tok[9]) {
			only_allowed_names = 0;
			if (rc == 0 && !code_listed(want_codes, tok + 9))
				abort(); /* a code asked for and dropped: the token would be wider */
			continue;
		}
		bit = auth_scope_bit(tok);
		if (!bit || !(allowed & bit))
			only_allowed_names = 0;
		else if (rc == 0 && !(want & bit))
			abort();
	}
	if (rc == -1 && only_allowed_names)
		abort();
	if (rc != 0) {
		if (rc != -1 && rc != -2)
			abort();
		goto out;
	}
	if ((want & ~allowed) || json_array_size(want_codes) > AUTH_MAX_PROPS)
		abort();
	json_array_foreach(want_codes, i, v) {
		if (!json_is_string(v) || (codes && !code_listed(codes, json_string_value(v))))
			abort();
		for (j = 0; j < i; j++)
			if (json_equal(v, json_array_get(want_codes, j)))
				abort();
	}
	/* The granted scope string reads back as the same bits. */
	auth_scope_string(want, names, sizeof names);
	json_array_clear(want_codes);
	if (oauth_scope_parse(names, allowed, codes, &again, want_codes) != 0 || again != want)
		abort();
out:
	free(copy);
	json_decref(want_codes);
}

static void check_assertion(const char *assertion)
{
	unsigned char *xml = NULL;
	size_t len = 0, cap = 0;
	char issuer[512];
	int rc;

	rc = oauth_assertion_decode(assertion, &xml, &len, &cap);
	if (rc < 0) {
		if (xml || len || cap || (rc != -1 && rc != -2))
			abort();
		return;
	}
	if (!xml || len > cap || len > SAML_MAX_XML)
		abort();
	if (saml_peek_issuer((const char *)xml, len, issuer, sizeof issuer) == 0 &&
	    !memchr(issuer, '\0', sizeof issuer))
		abort();
	free(xml);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const codes_s = "[\"WAW01\", \"KRK02\"]";
	const uint8_t *nl = memchr(data, '\n', size);
	size_t hlen = nl ? (size_t)(nl - data) : size;
	const char *why = NULL;
	struct form f;
	json_t *codes;
	char *h;

	h = malloc(hlen + 1);
	if (!h)
		return 0;
	memcpy(h, data, hlen);
	h[hlen] = '\0';
	check_header(h);
	free(h);
	if (!nl)
		return 0;
	if (form_parse((const char *)nl + 1, size - hlen - 1, &f, &why) < 0)
		return 0;
	check_scope(form_get(&f, "scope"), AUTH_SCOPE_ALL, NULL);
	codes = json_loads(codes_s, 0, NULL);
	if (codes)
		check_scope(form_get(&f, "scope"),
			    AUTH_SCOPE_PORTFOLIOS_READ | AUTH_SCOPE_RATES_WRITE, codes);
	json_decref(codes);
	if (form_get(&f, "assertion"))
		check_assertion(form_get(&f, "assertion"));
	form_free(&f);
	return 0;
}
