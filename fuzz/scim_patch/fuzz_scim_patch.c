/* libFuzzer driver for SCIM PATCH (scim_patch.h) as a PATCH request
 * reaches it: the input is the request body, parsed by
 * validate_parse_body as pipeline.c parses a SCIM body, then applied with
 * scim_patch_apply to a stored user and to a stored group (shapes of
 * t/unit/identity/test_scim_patch.c, with the enterprise extension and emails);
 * a result is then checked with scim_schema_check against the published
 * schemas with the stored resource as "before", as scim.c does before
 * storing a PATCH.
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise of the module is broken: the status is one of the
 * scim_patch_error codes; a refusal comes with a message that can go into
 * a JSON error body and leaves the resource exactly as it was (all or
 * nothing); an acceptance leaves an object whose "id" and "meta" are
 * unchanged (a path naming them is a mutability error, a path-less value
 * ignores them) and which scim_patch_normalize accepts again without
 * changing it; a schema refusal comes with a message too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/validate.h"
#include "identity/scim_filter.h"
#include "identity/scim_patch.h"
#include "identity/scim_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char stored_user[] =
	"{\"schemas\": [\"" SCIM_URN_USER "\", \"" SCIM_URN_ENTERPRISE "\"], \"id\": \"usr_1\","
	" \"userName\": \"bob@example.com\", \"active\": true, \"externalId\": \"00u1\","
	" \"name\": {\"givenName\": \"Robert\", \"familyName\": \"Smith\"},"
	" \"emails\": [{\"type\": \"work\", \"value\": \"bob@example.com\", \"primary\": true},"
	"  {\"type\": \"home\", \"value\": \"bob@home.example\"}],"
	" \"roles\": [{\"value\": \"revenue-approver\"}],"
	" \"" SCIM_URN_ENTERPRISE
	"\": {\"employeeNumber\": \"701984\", \"manager\": {\"value\": \"usr_2\"}},"
	" \"meta\": {\"resourceType\": \"User\", \"created\": \"2020-01-01T00:00:00Z\"}}";

static const char stored_group[] =
	"{\"schemas\": [\"" SCIM_URN_GROUP "\"], \"id\": \"grp_1\", \"displayName\": \"Ops\","
	" \"members\": [{\"value\": \"u1\", \"display\": \"One\"}, {\"value\": \"u2\"},"
	"  {\"value\": \"u4\"}],"
	" \"meta\": {\"resourceType\": \"Group\"}}";

static json_t *user, *group;

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

static void apply_to(const char *type, const json_t *stored, const json_t *body)
{
	json_t *res = json_deep_copy(stored), *again = NULL;
	char err[256];
	int rc;

	if (!res)
		return;
	err[0] = '\0';
	rc = scim_patch_apply(res, body, err, sizeof err);
	if (rc < SCIM_PATCH_MUTABILITY || rc > SCIM_PATCH_OK)
		abort();
	if (rc != SCIM_PATCH_OK) {
		check_message(err);
		if (!json_equal(res, stored))
			abort();
		goto out;
	}
	if (!json_is_object(res) ||
	    !json_equal(json_object_get(res, "id"), json_object_get(stored, "id")) ||
	    !json_equal(json_object_get(res, "meta"), json_object_get(stored, "meta")))
		abort();
	again = json_deep_copy(res);
	if (!again)
		goto out;
	if (scim_patch_normalize(again, err, sizeof err) != SCIM_PATCH_OK || !json_equal(again, res))
		abort();
	err[0] = '\0';
	if (scim_schema_check(scim_schemas_builtin(), type, res, stored, err, sizeof err) < 0)
		check_message(err);
out:
	json_decref(again);
	json_decref(res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = NULL;

	if (!user) {
		user = json_loads(stored_user, 0, NULL);
		group = json_loads(stored_group, 0, NULL);
		if (!user || !group)
			abort();
	}
	if (validate_parse_body((const char *)data, size, &body, NULL) < 0)
		return 0;
	apply_to("User", user, body);
	apply_to("Group", group, body);
	json_decref(body);
	return 0;
}
