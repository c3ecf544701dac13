/* scim_schema: checks a SCIM resource against the schemas revops publishes
 * at /scim/v2/Schemas and /scim/v2/ResourceTypes (src/identity/scim_meta.json,
 * compiled into the binary), following RFC 7643 §2: the type of every
 * attribute it knows (string, boolean, decimal, integer, dateTime,
 * reference, binary, complex), multiValued, the sub-attributes of complex
 * attributes, required attributes, and the common attributes of §3
 * (schemas, externalId). One validator for every SCIM write: POST, PUT and
 * the result of a PATCH, for users and groups.
 *
 * What it keeps, on purpose (docs/scim.md, "What is validated"):
 * - null is "unassigned" (RFC 7643 §2.5) for any attribute that is not
 *   required, at any depth;
 * - attributes, sub-attributes and extensions it does not know are kept
 *   unchecked (revops stores the document as sent);
 * - names compare case-insensitively (RFC 7643 §2.1);
 * - the elements of a user's "roles" and a group's "members" may be bare
 *   strings, standing for {"value": ...} (clients send both);
 * - a value equal to the one the resource already holds at the same place
 *   is not checked again, so a resource stored before this check (with a
 *   wrong type in it) can still be changed, deactivated above all.
 * The Okta/Entra normalisations ("True"/"False" strings in active and
 * primary, manager as a bare id) are scim_patch_normalize()'s and run
 * before this check. */
#ifndef REVOPS_SCIM_SCHEMA_H
#define REVOPS_SCIM_SCHEMA_H
#include <stddef.h>
#include <jansson.h>
#include "core/common.h"

struct scim_schemas; /* the loaded schemas and resource types, opaque */

/* What scim_schema_check() answers; the caller maps a refusal to the
 * RFC 7644 §3.12 scimType named here. */
enum scim_schema_result {
	SCIM_SCHEMA_OK = 0,
	SCIM_SCHEMA_INVALID_VALUE = -1,  /* invalidValue: a wrong type, a required
					  * attribute missing */
	SCIM_SCHEMA_INVALID_SYNTAX = -2, /* invalidSyntax: one attribute given
					  * twice, in two spellings */
};

/* Loads schemas and resource types from a discovery document shaped like
 * src/identity/scim_meta.json: {"schemas": [{id, attributes: [...]}, ...],
 * "resource_types": [{id, schema, schemaExtensions?: [{schema}]}, ...]}.
 * Returns 0 with *out (free it with scim_schemas_free), or -1 with *out
 * NULL and a message in err (errcap > 0): text that is not JSON, an
 * attribute without a name or of an unknown type, a resource type naming a
 * schema that is not there, or no memory. */
int scim_schemas_load(const char *meta_json, struct scim_schemas **out, char *err, size_t errcap) WUR;
void scim_schemas_free(struct scim_schemas *s);

/* The schemas revops publishes (embedded_scim_meta), loaded once on first
 * use and kept for the life of the process; safe from any thread. NULL
 * only if the embedded document does not load, which the unit tests rule
 * out. */
const struct scim_schemas *scim_schemas_builtin(void);

/* Checks doc, a resource of the resource type named type ("User" or
 * "Group"), against s. before is the resource as stored before this write
 * (the PATCHed or PUT resource) or NULL for a new one: any value of doc
 * equal to before's at the same place (same attribute, same array index)
 * is taken as it is. Returns SCIM_SCHEMA_OK when doc conforms, else a
 * refusal with a message in err (errcap > 0) naming the first offending
 * attribute by its path:
 * - SCIM_SCHEMA_INVALID_VALUE for a wrong type or a required attribute
 *   missing, such as "emails[1].value must be a string (got an integer)" or
 *   "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager must
 *   be a complex value (a JSON object) (got an array)"; also for an
 *   unknown resource type, and when memory runs out;
 * - SCIM_SCHEMA_INVALID_SYNTAX when one object holds a known attribute
 *   under two spellings ("active" and "ACTIVE"), unless before held both.
 * doc is not changed. */
int scim_schema_check(const struct scim_schemas *s, const char *type, const json_t *doc,
		      const json_t *before, char *err, size_t errcap) WUR;

#endif
