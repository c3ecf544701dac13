/* validate: strict parsing of JSON request bodies and declarative checks of
 * their fields, producing the contract's error `details` entries. */
#ifndef REVOPS_VALIDATE_H
#define REVOPS_VALIDATE_H
#include <stddef.h>
#include <jansson.h>
#include "core/buf.h"
#include "core/common.h"

/* Deepest nesting of arrays and objects a request body may have; the
 * top-level object is level 1. */
#define VALIDATE_MAX_DEPTH 32
/* Defaults for vfield.max when it is 0. */
#define VALIDATE_DEFAULT_MAX_STRING 1024
#define VALIDATE_DEFAULT_MAX_ITEMS 1000
/* Most entries a details array is allowed to hold (see validate_add_detail). */
#define VALIDATE_MAX_DETAILS 100
/* Unknown keys longer than this many bytes are shortened (at a character
 * boundary, followed by "...") in a detail's field path. */
#define VALIDATE_MAX_KEY_IN_PATH 64

/* Parses a request body. The body must be non-empty (not only whitespace),
 * valid UTF-8 without NUL bytes (and no \u0000 escapes), nested at most
 * VALIDATE_MAX_DEPTH levels, free of duplicate object keys and trailing
 * data, and its top level must be an object. Depth, NUL and UTF-8 are
 * checked by one linear pre-scan before jansson sees the bytes, so a
 * megabyte of "[" never reaches the recursive parser.
 * Returns 0 and stores a new reference in *out (the caller json_decref()s
 * it). Returns -1 when the body is rejected, -2 when memory ran out; *out is
 * then NULL and err's contents are replaced by a human-readable message
 * (valid UTF-8, e.g. "invalid JSON at line 1 column 7: invalid token near
 * 'x'") unless err is NULL. */
int validate_parse_body(const char *body, size_t len, json_t **out, struct buf *err) WUR;

enum vtype { V_STRING = 1, V_INT, V_NUMBER, V_BOOL, V_OBJECT, V_ARRAY, V_ANY };

struct vfield {
	const char *name; /* NULL terminates a spec array */
	enum vtype type;
	int required; /* 1 = must be present */
	int nullable; /* 1 = JSON null accepted */
	size_t max; /* V_STRING: max length in Unicode code points; V_ARRAY: max items; 0 = 1024 for strings, 1000 for arrays */
	const struct vfield *fields; /* V_OBJECT: nested spec (unknown keys rejected); NULL = any object */
	enum vtype items;            /* V_ARRAY: item type (0 = any) */
	const struct vfield *item_fields; /* V_ARRAY of V_OBJECT: spec of each item */
};

/* Checks obj against spec and appends one {"field": "<path>", "issue":
 * "<text>"} object per problem to details (a JSON array owned by the
 * caller). Paths are dotted for nested objects ("proposed_rate.minor_units")
 * and use [i] for array items ("items[0].sku"), each below prefix ("" at the
 * top level).
 * Order: the keys of obj in the order they appear (an unknown key gives "is
 * not a known field"; a known one is type-checked, then its nested object
 * or items are checked depth first), then the missing required fields in
 * spec order ("is required").
 * Issues: "must be a string" / "an integer" (1.0 is a real, not an
 * integer) / "a number" / "a boolean" / "an object" / "an array", also for
 * null in a field that is not nullable; "must not be null" for a V_ANY field
 * that is not nullable; "must be at most N characters" (code points);
 * "must have at most N items". Array items of a given type may not be null.
 * Returns the number of problems found (0 = valid). details keeps at most
 * VALIDATE_MAX_DETAILS entries, so when it overflows fewer are appended than
 * returned; a body with problems never returns 0. */
int validate_object(const json_t *obj, const struct vfield *spec, const char *prefix,
		    json_t *details);

/* Counts the code points of the NUL-terminated string s. Returns 0 and sets
 * *codepoints (if not NULL), or -1 when s is not valid UTF-8 (overlong forms,
 * surrogates, values above U+10FFFF and truncated sequences are invalid). */
int validate_utf8_len(const char *s, size_t *codepoints) WUR;

/* Appends {"field": field, "issue": issue} to the details array, for
 * handlers' own semantic problems ("must be a positive integer"). Does
 * nothing when details already holds VALIDATE_MAX_DETAILS entries, when
 * either string is not valid UTF-8, or when memory runs out. */
/* Length (1-4) of the well-formed UTF-8 sequence at p, of at most n bytes,
 * or 0 when it is ill-formed (overlong, surrogate, above U+10FFFF, cut
 * short). The one UTF-8 decoder of the project. */
size_t validate_utf8_step(const unsigned char *p, size_t n);
void validate_add_detail(json_t *details, const char *field, const char *issue);
/* 1 when s is NULL, empty or only white space (a field that "must not be
 * empty"), else 0. */
int validate_blank(const char *s);
/* 1 when s is a code (room type, property, brand codes): 1 to 32 of
 * A-Z a-z 0-9 - _ . ; else 0 (NULL included). */
int validate_code(const char *s);

#endif
