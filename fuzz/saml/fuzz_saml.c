/* libFuzzer driver for saml_verify with a fixed expectation and a fixed
 * public test certificate. Its private key is not in the repository: seed
 * documents signed with it (made once with the xmlsec1 CLI) reach the claim
 * checks, and mutations that keep the signed content intact (comments,
 * whitespace between elements, KeyInfo) keep reaching them; everything else
 * exercises the parser, the shape checks and xmlsec's verification.
 * Besides memory errors and leaks (ASan) it aborts when a promise of the
 * module is broken: a refusal comes with a non-empty reason that does not
 * quote the input and leaves no roles behind, an acceptance comes with a
 * NameID, an ID, the expected issuer and a roles array of strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "identity/saml.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char test_cert[] = "-----BEGIN CERTIFICATE-----\n"
				"MIIDRTCCAi2gAwIBAgIUG6tCjHYtCbQ4x6ozv9NrtvJ7mWQwDQYJKoZIhvcNAQEL\n"
				"BQAwMTEvMC0GA1UEAwwmcmV2b3BzIGZ1enogdGVzdCBJZFAgKHB1YmxpYyB0ZXN0\n"
				"IGtleSkwIBcNMjYxMTIyMTA1NTQ3WhgPMjEyNjEwMjkxMDU1NDdaMDExLzAtBgNV\n"
				"BAMMJnJldm9wcyBmdXp6IHRlc3QgSWRQIChwdWJsaWMgdGVzdCBrZXkpMIIBIjAN\n"
				"BgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAm0g4VuUl3nMcgffhoIeQolL49q2T\n"
				"lwqW/8n9+RFQdSzbU3XVgY4FSL/urXkFcTJrkH3hOR84vXMhYOHFowH5acH29KFO\n"
				"NzHi+r4hJ1PFI/62NimQ3vUBj/lhiYb7iFYwcibmqF06NwT40jaAaoLRCEHFoO3X\n"
				"J+sab7jbuaj81/X0hoFj0DC309p+2jj6oCc2adYeFRD6JyvutkEQOxvw5Blowh73\n"
				"nxnwAclI5XQKeXXncCc3WT36WBsHo/1by7NiykRMZJ2MFIo2raMcMZYY6MooKJ9g\n"
				"8/ZUjZL6p5OB6uwjOWMVvvSZE2gYQHoIWHmMRE658c1iG32Q65EBRwmYJwIDAQAB\n"
				"o1MwUTAdBgNVHQ4EFgQUK4ZH05v60/GglQWfTSCc6QKsT+YwHwYDVR0jBBgwFoAU\n"
				"K4ZH05v60/GglQWfTSCc6QKsT+YwDwYDVR0TAQH/BAUwAwEB/zANBgkqhkiG9w0B\n"
				"AQsFAAOCAQEAWQf2YJmFbF4FajS398YNf7xGRMRS+SLIux6SjEqFp1DyhR8OGgsr\n"
				"e05lEQBuQVIduSxFt1J+PFZq47C/JwDN4JpQUtR68vogDVG3b2VS9IQddMT/Yq/Y\n"
				"gzy6wDg0zcqezbrHdFD6mgyFeGpGYEKKaQ/L5NpM/H1FTNwZUxCah4Y9abHCGCWJ\n"
				"L3flK0tNYPGRI1hRf+xI+vHF5i3LSTUDmsA+eTbx4Tw4QPS7duyNyyPX1CotIDFy\n"
				"OVEXKaTlJ7zd6PPDJJ7raYTt1U8Q++7iikhOblGIznD+QFmwrBzEE2AGm0OIhTuv\n"
				"Gz7nQl4YjAlDDJMOZe7ERp5tKZq9FzRyHg==\n"
				"-----END CERTIFICATE-----\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (saml_global_init() < 0)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct saml_expect e = {
		.idp_entity_id = "https://idp.example.com/metadata",
		.idp_cert_pem = test_cert,
		.audience = "https://revops.example.com/saml/sp",
		.recipient = "https://revops.example.com/oauth/token",
		.now_ms = 1717243200000LL, /* 2024-06-01T12:00:00Z */
		.skew_ms = 120000,
		.roles_attribute = "roles",
	};
	struct saml_assertion a;
	char err[128];
	size_t i;

	if (saml_verify((const char *)data, size, &e, &a, err, sizeof err) < 0) {
		if (err[0] == '\0' || strchr(err, '<') != NULL || a.roles != NULL)
			abort();
		saml_assertion_free(&a);
		return 0;
	}
	if (a.name_id[0] == '\0' || a.id[0] == '\0' || !json_is_array(a.roles) ||
	    strcmp(a.issuer, e.idp_entity_id) != 0)
		abort();
	for (i = 0; i < json_array_size(a.roles); i++)
		if (!json_is_string(json_array_get(a.roles, i)))
			abort();
	saml_assertion_free(&a);
	return 0;
}
