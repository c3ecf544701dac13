/* libFuzzer driver for scim_filter: the input is tried both as a filter and
 * as a PATCH path. Besides memory errors (ASan) and undefined behaviour
 * (UBSan) it aborts when a promise of the module is broken: input longer
 * than SCIM_FILTER_MAX_LEN is never accepted, a rejection always comes with
 * a non-empty message that is valid UTF-8 (it goes into a JSON error
 * body), and matching an accepted filter answers 0 or 1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "identity/scim_filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char sample_user[] =
	"{\"schemas\": [\"urn:ietf:params:scim:schemas:core:2.0:User\","
	" \"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User\"],"
	" \"id\": \"2819c223\", \"externalId\": \"Ext-1\", \"userName\": \"OMalley@example.com\","
	" \"name\": {\"familyName\": \"Employee\", \"givenName\": \"Test\"},"
	" \"displayName\": \"BobIsAmazing\", \"active\": true, \"loginCount\": 42, \"score\": 1.5,"
	" \"title\": \"\", \"nickName\": null, \"roles\": [], \"tags\": [\"a\", [\"b\"], 3],"
	" \"emails\": [{\"type\": \"work\", \"value\": \"test@example.com\", \"primary\": true},"
	"  {\"type\": \"home\", \"value\": \"home@example.org\"}, \"stray\", null],"
	" \"meta\": {\"created\": \"2015-10-10T22:00:00.000Z\", \"lastModified\": \"2016-01-01T00:00:00+01:00\"},"
	" \"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User\":"
	"  {\"employeeNumber\": \"701984\", \"manager\": {\"value\": \"m1\"}}}";

static json_t *user;

/* Rejections must explain themselves in a string jansson accepts. */
static void check_message(const char *err)
{
	json_t *s;

	if (!err[0])
		abort();
	s = json_string(err);
	if (!s)
		abort();
	json_decref(s);
}

static void check_match(const struct scim_filter *f, const json_t *v)
{
	int r = scim_filter_match(f, v);

	if (r != 0 && r != 1)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scim_filter *f = NULL;
	struct scim_path p;
	json_t *tmpl;
	char err[256];
	char *text;
	size_t i;

	if (!user) {
		user = json_loads(sample_user, 0, NULL);
		if (!user)
			abort();
	}
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	if (scim_filter_parse(text, &f, err, sizeof err) == 0) {
		if (!f || strlen(text) > SCIM_FILTER_MAX_LEN)
			abort();
		check_match(f, user);
		for (i = 0; i < 4; i++)
			check_match(f, json_array_get(json_object_get(user, "emails"), i));
		tmpl = json_object();
		if (tmpl && scim_filter_template(f, tmpl) == 0 && !json_is_object(tmpl))
			abort();
		json_decref(tmpl);
		scim_filter_free(f);
	} else {
		if (f)
			abort();
		check_message(err);
	}

	if (scim_path_parse(text, &p, err, sizeof err) == 0) {
		if (strlen(text) > SCIM_FILTER_MAX_LEN || (!p.attr[0] && !p.urn[0]))
			abort();
		if (p.filter) {
			check_match(p.filter, user);
			check_match(p.filter, json_array_get(json_object_get(user, "emails"), 0));
		}
		scim_path_free(&p);
		if (p.filter)
			abort();
	} else {
		if (p.filter)
			abort();
		check_message(err);
	}
	free(text);
	return 0;
}
