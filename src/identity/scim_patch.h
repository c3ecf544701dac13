/* scim_patch: RFC 7644 §3.5.2 PATCH operations applied to a SCIM resource
 * held as a jansson object, accepting what Okta and Entra ID really send
 * (op in any case, booleans as strings, path-less values with dotted or URN
 * keys, value paths that create their target, Entra-style member removal). */
#ifndef REVOPS_SCIM_PATCH_H
#define REVOPS_SCIM_PATCH_H
#include <stddef.h>
#include <jansson.h>
#include "core/common.h"

#define SCIM_PATCH_URN "urn:ietf:params:scim:api:messages:2.0:PatchOp"
/* Most operations one request may carry. */
#define SCIM_PATCH_MAX_OPS 100

enum scim_patch_error {
	SCIM_PATCH_OK = 0,
	SCIM_PATCH_INVALID_SYNTAX = -1, /* scimType invalidSyntax */
	SCIM_PATCH_INVALID_PATH = -2,   /* invalidPath */
	SCIM_PATCH_NO_TARGET = -3,      /* noTarget */
	SCIM_PATCH_INVALID_VALUE = -4,  /* invalidValue (also "too many operations") */
	SCIM_PATCH_MUTABILITY = -5,     /* mutability (a path naming id or meta) */
};

/* Applies body["Operations"] (an array of one to SCIM_PATCH_MAX_OPS
 * {op, path?, value?} objects) to resource, a JSON object, then
 * scim_patch_normalize()s it. All or nothing: the operations run on a deep
 * copy that replaces resource's members only when every one succeeded, so
 * on error resource is untouched. The caller keeps ownership of both
 * arguments. If body has "schemas" it must list SCIM_PATCH_URN. A missing,
 * non-array or empty "Operations" is INVALID_SYNTAX (RFC 7644 §3.5.2 asks
 * for one or more); more than SCIM_PATCH_MAX_OPS is INVALID_VALUE.
 * Returns SCIM_PATCH_OK, or an error code with a short human message in err
 * (errcap > 0). Out of memory reports SCIM_PATCH_INVALID_VALUE.
 *
 * - op: add / replace / remove in any case; anything else INVALID_SYNTAX.
 * - Without path, add/replace take an object whose keys are attribute
 *   names, "attr.sub", "URN:attr[.sub]", or a schema URN whose object value
 *   merges into that extension; "id", "meta" and "schemas" keys are ignored.
 *   Remove without path is NO_TARGET.
 * - An object value merges into an existing complex attribute (given
 *   sub-attributes set, others kept); a null value removes the attribute.
 *   Add to a multi-valued attribute appends, skipping elements equal to an
 *   existing one or with the same "value" and "type" (those merge into the
 *   first such element, counting ones appended before); replace sets the
 *   whole array. Elements are found through an index, so adding or
 *   removing n elements of an m-element array costs O((n + m) log(n + m));
 *   an element nested deeper than 64 levels is INVALID_VALUE.
 * - attr[filter] / attr[filter].sub: add and replace change every matching
 *   element (replace of a whole element keeps the filter's eq fields); when
 *   none matches, a new element is appended made of the filter's and-ed eq
 *   comparisons plus the value (a filter of any other shape is NO_TARGET).
 *   Remove drops matching elements (or their sub-attribute); no match is OK.
 * - remove attr with a value array drops the elements whose "value" equals
 *   one given (Entra's members removal); without value drops attr.
 * - A path naming "id" or "meta" is MUTABILITY; "schemas" is ignored.
 * - Names resolve case-insensitively, keeping an existing key's spelling;
 *   new keys of well-known SCIM attributes take their canonical case. A new
 *   extension object also adds its URN to resource["schemas"] when that is
 *   an array. */
int scim_patch_apply(json_t *resource, const json_t *body, char *err, size_t errcap) WUR;

/* Normalises Okta/Entra quirks in resource in place (used after PATCH and
 * on POST/PUT), under every spelling of each name (any case):
 * - "active" and every "primary" (at any depth) given as a string
 *   "true"/"false" in any case become JSON booleans; any other value but
 *   null is INVALID_VALUE, with a message naming the member by its path
 *   ("emails[1].primary must be a boolean, or the string \"true\" or
 *   \"false\" (got a string)");
 * - the enterprise extension's "manager" given as a bare string or a
 *   one-element array becomes {"value": "..."} (an object is kept; "" or
 *   null or [] removes it; a longer array is INVALID_VALUE).
 * Returns SCIM_PATCH_OK or an error code with a message in err; resource
 * may be partly normalised on error. */
int scim_patch_normalize(json_t *resource, char *err, size_t errcap) WUR;

#endif
