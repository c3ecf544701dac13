/* libFuzzer driver for validate_parse_body and validate_object.
 * Besides memory errors (ASan) it aborts when a promise of the module is
 * broken: an accepted body must be an object no deeper than
 * VALIDATE_MAX_DEPTH, a rejected one must come with a UTF-8 message, and
 * every detail must be a two-string object. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct vfield money_spec[] = {
	{.name = "currency", .type = V_STRING, .required = 1, .max = 3},
	{.name = "minor_units", .type = V_INT, .required = 1},
	{0}};

static const struct vfield item_spec[] = {
	{.name = "sku", .type = V_STRING, .required = 1, .max = 16},
	{.name = "qty", .type = V_INT},
	{.name = "price", .type = V_OBJECT, .nullable = 1, .fields = money_spec},
	{0}};

static const struct vfield body_spec[] = {
	{.name = "property_id", .type = V_STRING, .required = 1},
	{.name = "proposed_rate", .type = V_OBJECT, .required = 1, .fields = money_spec},
	{.name = "note", .type = V_STRING, .nullable = 1, .max = 8},
	{.name = "score", .type = V_NUMBER},
	{.name = "publish", .type = V_BOOL},
	{.name = "properties", .type = V_ARRAY, .items = V_STRING, .max = 4},
	{.name = "items", .type = V_ARRAY, .items = V_OBJECT, .item_fields = item_spec, .max = 3},
	{.name = "meta", .type = V_OBJECT},
	{.name = "tags", .type = V_ARRAY},
	{.name = "extra", .type = V_ANY},
	{0}};

static size_t depth(const json_t *v)
{
	const char *key;
	json_t *c;
	size_t i, d, max = 0;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, c) {
			d = depth(c);
			if (d > max)
				max = d;
		}
		return max + 1;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, c) {
			d = depth(c);
			if (d > max)
				max = d;
		}
		return max + 1;
	}
	return 0;
}

static void check_details(const json_t *details, int problems)
{
	size_t i;
	json_t *d;

	if (problems < 0 || (problems == 0) != (json_array_size(details) == 0) ||
	    json_array_size(details) > VALIDATE_MAX_DETAILS ||
	    json_array_size(details) > (size_t)problems)
		abort();
	json_array_foreach(details, i, d) {
		if (json_object_size(d) != 2 || !json_is_string(json_object_get(d, "field")) ||
		    !json_is_string(json_object_get(d, "issue")))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *root = NULL, *details = NULL;
	struct buf err;
	size_t cp;
	int rc, n;

	buf_init(&err, 4096);
	rc = validate_parse_body((const char *)data, size, &root, &err);
	if (rc < 0) {
		if (root || !err.data || err.len == 0 || validate_utf8_len(err.data, &cp) < 0)
			abort();
		goto out;
	}
	if (!json_is_object(root) || depth(root) > VALIDATE_MAX_DEPTH)
		abort();
	details = json_array();
	if (!details)
		goto out;
	n = validate_object(root, body_spec, "", details);
	check_details(details, n);
	json_array_clear(details);
	n = validate_object(root, money_spec, "rate", details);
	check_details(details, n);
out:
	json_decref(details);
	json_decref(root);
	buf_free(&err);
	return 0;
}
