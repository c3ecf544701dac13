/* scim_filter: SCIM 2.0 filter expressions (RFC 7644 §3.4.2.2) and PATCH
 * attribute paths (§3.5.2): a recursive-descent parser producing an AST, and
 * an evaluator that matches the AST against a resource held as jansson JSON.
 *
 * Besides the RFC grammar the parser accepts what real clients send: any
 * whitespace between tokens, keywords and operators in any case, and bare
 * (unquoted) comparison values such as `userName sw O` or
 * `meta.created gt 2015-10-10T14:38:21.8617979-07:00`. Those are beyond
 * RFC 7644 (compValue is false, null, true, a number or a quoted string):
 * Microsoft's SCIM reference collection (../shared/conformance/scim) filters
 * with exactly these and checks the results, and docs/scim.md records why
 * they stay. A bare value holding '"', '\', '(', '[' or a control byte, or
 * one that is "and", "or" or "not", is refused as a malformed filter. */
#ifndef REVOPS_SCIM_FILTER_H
#define REVOPS_SCIM_FILTER_H
#include <stddef.h>
#include <jansson.h>
#include "core/common.h"

#define SCIM_URN_USER "urn:ietf:params:scim:schemas:core:2.0:User"
#define SCIM_URN_GROUP "urn:ietf:params:scim:schemas:core:2.0:Group"
#define SCIM_URN_ENTERPRISE "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"

/* Longest filter text, in bytes. */
#define SCIM_FILTER_MAX_LEN 4096
/* Deepest nesting; each "(", each "not" and each "[" is one level. */
#define SCIM_FILTER_MAX_DEPTH 16
/* Most AST nodes (comparisons, value paths, and, or, not) in one filter. */
#define SCIM_FILTER_MAX_NODES 128

struct scim_filter; /* parsed filter (AST), opaque */

/* A parsed attribute path: [URN:]attr[.sub] or [URN:]attr[filter][.sub]. */
struct scim_path {
	char urn[128];              /* schema URN prefix as written, or "" */
	char attr[64];              /* top-level attribute as written (compare case-insensitively);
			 * "" only when the whole path is a known schema URN
			 * (SCIM_URN_USER, SCIM_URN_GROUP, SCIM_URN_ENTERPRISE),
			 * which then names the extension object itself */
	char sub[64];               /* sub-attribute or "" */
	struct scim_filter *filter; /* value filter inside [...] or NULL; owned */
};

/* Parses filter text (NUL-terminated, at most SCIM_FILTER_MAX_LEN bytes of
 * UTF-8). Returns 0 and a new filter in *out (free it with
 * scim_filter_free), or -1 with *out NULL and a short human message in err
 * (errcap > 0; e.g. "unterminated string at position 10"), which the caller
 * answers with 400 scimType invalidFilter. Running out of memory is also -1
 * ("out of memory"). */
int scim_filter_parse(const char *text, struct scim_filter **out, char *err, size_t errcap) WUR;
void scim_filter_free(struct scim_filter *f);

/* Returns 1 if resource (a SCIM resource JSON object) matches f, else 0; a
 * NULL f matches everything.
 * Attribute names compare case-insensitively. A URN prefix selects the
 * extension object resource[urn]; the core User and Group URNs select the
 * top level. A multi-valued attribute matches when any element does; a
 * sub-attribute of a multi-valued attribute (emails.value) matches any
 * element's sub-attribute; an element that is an object compared without a
 * sub-attribute stands for its "value". Inside attr[...] the names are
 * sub-attributes of each element.
 * pr: present, not null, not "" / [] / {}. eq null: absent or null; ne null:
 * the opposite. ne v: the attribute has no value, or some value is not v.
 * Strings compare case-insensitively (ASCII), except "id" and "externalId"
 * (caseExact). Two strings that both parse as RFC 3339 date-times (any
 * fraction length, offset optional = UTC) compare as instants; for gt/ge/lt/
 * le on "created"/"lastModified" an unparseable side never matches.
 * Numbers compare numerically (also a numeric string against a number
 * literal); booleans only with eq/ne (a string "True"/"false" equals the
 * boolean); ordering a boolean never matches. */
int scim_filter_match(const struct scim_filter *f, const json_t *resource);

/* Builds the element a value filter describes: for a filter made only of
 * `attr eq literal` comparisons joined by "and" (no URN, no sub-attribute,
 * no null), sets obj[attr] = literal for each (names as written). Returns 0,
 * or -1 when the filter has any other shape (obj may then be partly filled)
 * or memory runs out. Used by PATCH to create the target of a value path
 * that matches nothing. */
int scim_filter_template(const struct scim_filter *f, json_t *obj) WUR;

/* Parses a PATCH path (RFC 7644 §3.5.2: attrPath / valuePath [subAttr]),
 * surrounding whitespace allowed. Returns 0 with *out filled (release it
 * with scim_path_free), or -1 with *out zeroed and a message in err (the
 * caller answers invalidPath). */
int scim_path_parse(const char *text, struct scim_path *out, char *err, size_t errcap) WUR;
void scim_path_free(struct scim_path *p); /* frees p->filter; p stays valid, empty */

/* Case-insensitive member lookup: returns obj's value for the first key
 * equal to name ignoring ASCII case (an exact match wins), or NULL (also
 * when obj is not an object). When key is not NULL the existing key's
 * spelling is stored there (valid while the member exists). */
json_t *scim_object_get(const json_t *obj, const char *name, const char **key);

/* 1 if s is an RFC 3339 / xsd:dateTime date-time as filters compare them,
 * YYYY-MM-DDTHH:MM:SS[.fraction][Z|+HH:MM|-HH:MM] (no offset meaning UTC)
 * naming a real calendar day, else 0. */
int scim_datetime_valid(const char *s);

/* What a message calls the JSON type of v ("an integer", "a string",
 * "null" for NULL too...), as in "nickName must be a string (got an
 * integer)". */
const char *scim_json_kind(const json_t *v);

/* 1 if urn names the top level of a resource (the core User or Group schema
 * URN, any case) or is "", else 0. */
int scim_urn_is_core(const char *urn);

#endif
