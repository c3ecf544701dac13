#include "operations/oncall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/tz.h"
#include "portfolio/portfolio.h"
#include "store/store.h"

#define DAY_MS 86400000LL

/* ------------------------------------------------------------ wall times */

/* Parses "YYYY-MM-DDTHH:MM" or "YYYY-MM-DDTHH:MM:SS" (a wall time, no
 * offset) into ms as if it were UTC. Returns 0 or -1. */
static int wall_parse(const char *s, int64_t *ms)
{
	unsigned y, mo, d, h, mi, sec = 0;
	int n = 0, len = s ? (int)strlen(s) : 0;
	int64_t day;

	if (len != 16 && len != 19)
		return -1;
	if (len == 16 && sscanf(s, "%4u-%2u-%2uT%2u:%2u%n", &y, &mo, &d, &h, &mi, &n) != 5)
		return -1;
	if (len == 19 && sscanf(s, "%4u-%2u-%2uT%2u:%2u:%2u%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
		return -1;
	if (n != len || mo < 1 || mo > 12 || d < 1 || d > (unsigned)clock_days_in_month(y, mo) ||
	    h > 23 || mi > 59 || sec > 59)
		return -1;
	day = clock_days_from_civil(y, mo, d);
	*ms = day * DAY_MS + (int64_t)(h * 3600 + mi * 60 + sec) * 1000;
	return 0;
}

/* A time of an override: a wall time (*absolute 0) or an RFC 3339 instant
 * with its offset (*absolute 1). Returns 0 or -1. */
static int when_parse(const char *s, int64_t *ms, int *absolute)
{
	*absolute = 0;
	if (wall_parse(s, ms) == 0)
		return 0;
	*absolute = 1;
	return s && clock_parse_time(s, ms) == 0 ? 0 : -1;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* ---------------------------------------------------------------- picking */

static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* 1 when entry e (a rotation or override) covers property id. */
static int covers(const json_t *e, const char *id)
{
	const json_t *props = json_object_get(e, "properties"), *v;
	size_t i;

	if (!props)
		return 1;
	json_array_foreach(props, i, v)
		if (!strcmp(json_string_value(v), id))
			return 1;
	return 0;
}

/* A copy of person with where it came from. */
static json_t *found(const json_t *person, const char *source, json_t *from)
{
	json_t *out = json_deep_copy(person);

	if (out) {
		json_object_set_new(out, "source", json_string(source));
		json_object_set_new(out, "from", from);
	} else {
		json_decref(from);
	}
	return out;
}

/* The override of level covering p at (wall: at in p's zone), or NULL. */
static json_t *pick_override(const json_t *doc, const char *id, int level, int64_t at, int64_t wall)
{
	const json_t *o;
	int64_t from, to;
	int abs_from, abs_to;
	size_t i;

	json_array_foreach(json_object_get(doc, "overrides"), i, o) {
		if (json_integer_value(json_object_get(o, "level")) != level || !covers(o, id) ||
		    when_parse(str(o, "from"), &from, &abs_from) < 0 ||
		    when_parse(str(o, "to"), &to, &abs_to) < 0)
			continue;
		if ((abs_from ? at : wall) >= from && (abs_to ? at : wall) < to)
			return found(json_object_get(o, "person"), "override",
				     json_integer((json_int_t)i));
	}
	return NULL;
}

/* The person of the rotation of level covering p at wall time wall. */
static json_t *pick_rotation(const json_t *doc, const char *id, int level, int64_t wall)
{
	const json_t *r, *people;
	int64_t anchor, every, k, n;
	size_t i;

	json_array_foreach(json_object_get(doc, "rotations"), i, r) {
		people = json_object_get(r, "people");
		n = (int64_t)json_array_size(people);
		if (json_integer_value(json_object_get(r, "level")) != level || !covers(r, id) ||
		    !n || wall_parse(str(r, "first_handover"), &anchor) < 0)
			continue;
		every = json_integer_value(json_object_get(r, "every_days"));
		every = (every > 0 ? every : 7) * DAY_MS;
		k = floor_div(wall - anchor, every);
		return found(json_array_get(people, (size_t)(((k % n) + n) % n)), "rotation",
			     json_string(str(r, "name")));
	}
	return NULL;
}

json_t *oncall_pick(const json_t *doc, const struct portfolio_property *p, int level, int64_t at)
{
	const struct tz *z = NULL;
	int64_t wall = at + (tz_get(p->timezone, &z) == 0 ? tz_offset_ms(z, at) : 0);
	json_t *who = pick_override(doc, p->id, level, at, wall);

	return who ? who : pick_rotation(doc, p->id, level, wall);
}

int oncall_levels(const json_t *doc)
{
	const char *lists[2] = {"rotations", "overrides"};
	const json_t *e;
	json_int_t top = 0, l;
	size_t i;

	for (int k = 0; k < 2; k++)
		json_array_foreach(json_object_get(doc, lists[k]), i, e) {
			l = json_integer_value(json_object_get(e, "level"));
			top = l > top ? l : top;
		}
	return (int)top;
}

/* The portfolio's rota, or *doc NULL. Returns 0 or < 0. */
static int load(struct store_tx *tx, const char *pf, json_t **doc)
{
	struct store_rows *r;
	int rc = store_query(tx, "SELECT document FROM oncall_rotas WHERE portfolio_id = $1",
			     (struct store_val[]){sv_text(pf)}, 1, &r);

	*doc = NULL;
	if (rc != STORE_OK)
		return rc;
	if ((rc = store_next(r)) == 1 && !(*doc = json_loads(store_text(r, 0), 0, NULL)))
		rc = STORE_ERR;
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

int oncall_who(struct store_tx *tx, const char *pf, const struct portfolio_property *p, int level,
	       int64_t at, json_t **person, int *levels)
{
	json_t *doc;
	int rc = load(tx, pf, &doc);

	*person = NULL;
	*levels = 0;
	if (rc < 0 || !doc)
		return rc;
	*levels = oncall_levels(doc);
	*person = oncall_pick(doc, p, level, at);
	json_decref(doc);
	return 0;
}

int oncall_set(struct store_tx *tx, const char *pf, const json_t *doc, int64_t now)
{
	char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	int rc = text ? store_exec(tx,
				   "INSERT INTO oncall_rotas (portfolio_id, document, updated_at)"
				   " VALUES ($1, $2, $3) ON CONFLICT (portfolio_id) DO UPDATE SET"
				   " document = excluded.document, updated_at = excluded.updated_at",
				   (struct store_val[]){sv_text(pf), sv_text(text), sv_int(now)}, 3)
		      : STORE_ERR;

	free(text);
	return rc < 0 ? rc : 0;
}

/* --------------------------------------------------------------- checking */

/* Sets err to "<where>: <what>" and returns 1. */
static int bad(char *err, size_t cap, const char *where, const char *what)
{
	snprintf(err, cap, "%s: %s", where, what);
	return 1;
}

/* 1 when every key of o is one of keys (NULL-terminated). */
static int only_keys(const json_t *o, const char *const *keys)
{
	const char *k;
	const json_t *v;
	size_t i;

	json_object_foreach((json_t *)o, k, v) {
		for (i = 0; keys[i] && strcmp(keys[i], k); i++)
			;
		if (!keys[i])
			return 0;
	}
	return 1;
}

/* 1 when o[k] is absent (and optional) or a string of 1..max bytes. */
static int text_ok(const json_t *o, const char *k, size_t max, int optional)
{
	const json_t *v = json_object_get(o, k);

	if (!v)
		return optional;
	return json_is_string(v) && json_string_length(v) >= 1 && json_string_length(v) <= max;
}

static int check_person(const json_t *p, const char *where, char *err, size_t cap)
{
	static const char *const keys[] = {"name", "email", "phone", NULL};
	const char *email = str(p, "email"), *phone = str(p, "phone");

	if (!json_is_object(p) || !only_keys(p, keys))
		return bad(err, cap, where, "must be an object of name, email and phone");
	if (!text_ok(p, "name", 200, 0))
		return bad(err, cap, where, "name must be a text of 1 to 200 characters");
	if (!text_ok(p, "email", 254, 1) || (email && !strchr(email, '@')))
		return bad(err, cap, where, "email must be an e-mail address");
	if (!text_ok(p, "phone", 32, 1) ||
	    (phone && (phone[0] != '+' || strlen(phone) < 8 ||
		       strspn(phone + 1, "0123456789") != strlen(phone) - 1)))
		return bad(err, cap, where, "phone must be an E.164 number such as +48600100200");
	return 0;
}

/* The common part of a rotation and an override: level and properties,
 * each property the portfolio's. Returns 0, 1 (err) or < 0. */
static int check_scope(struct store_tx *tx, const char *pf, const json_t *e, const char *where,
		       char *err, size_t cap)
{
	const json_t *props = json_object_get(e, "properties"), *v;
	json_int_t level = json_integer_value(json_object_get(e, "level"));
	size_t i;
	int rc;

	if (!json_is_integer(json_object_get(e, "level")) || level < 1 || level > ONCALL_MAX_LEVELS)
		return bad(err, cap, where, "level must be an integer from 1 to 5");
	if (props && (!json_is_array(props) || !json_array_size(props)))
		return bad(err, cap, where, "properties must be a non-empty list of property ids");
	json_array_foreach(props, i, v) {
		if (!json_is_string(v))
			return bad(err, cap, where, "properties must be property ids");
		if ((rc = portfolio_has_property(tx, pf, json_string_value(v))) < 0)
			return rc;
		if (rc == 0) {
			snprintf(err, cap, "%s: %s is not a property of this portfolio", where,
				 json_string_value(v));
			return 1;
		}
	}
	return 0;
}

static int check_rotation(struct store_tx *tx, const char *pf, const json_t *r, const char *where,
			  char *err, size_t cap)
{
	static const char *const keys[] = {"name",       "level",  "properties", "first_handover",
					   "every_days", "people", NULL};
	const json_t *people = json_object_get(r, "people"),
		     *every = json_object_get(r, "every_days"), *person;
	char at[96];
	int64_t ms;
	size_t i;
	int rc;

	if (!json_is_object(r) || !only_keys(r, keys))
		return bad(err, cap, where,
			   "must be an object of name, level, properties, first_handover, "
			   "every_days and people");
	if (!text_ok(r, "name", 100, 0))
		return bad(err, cap, where, "name must be a text of 1 to 100 characters");
	if ((rc = check_scope(tx, pf, r, where, err, cap)) != 0)
		return rc;
	if (wall_parse(str(r, "first_handover"), &ms) < 0)
		return bad(err, cap, where,
			   "first_handover must be a wall time YYYY-MM-DDTHH:MM, read in each "
			   "property's time zone");
	if (every && (!json_is_integer(every) || json_integer_value(every) < 1 ||
		      json_integer_value(every) > 28))
		return bad(err, cap, where, "every_days must be an integer from 1 to 28");
	if (!json_is_array(people) || !json_array_size(people) ||
	    json_array_size(people) > ONCALL_MAX_PEOPLE)
		return bad(err, cap, where, "people must list 1 to 100 people");
	json_array_foreach(people, i, person) {
		snprintf(at, sizeof at, "%s.people[%zu]", where, i);
		if ((rc = check_person(person, at, err, cap)) != 0)
			return rc;
	}
	return 0;
}

static int check_override(struct store_tx *tx, const char *pf, const json_t *o, const char *where,
			  char *err, size_t cap)
{
	static const char *const keys[] = {"level", "properties", "from", "to", "person", NULL};
	int64_t from, to;
	int abs_from, abs_to, rc;
	char at[96];

	if (!json_is_object(o) || !only_keys(o, keys))
		return bad(err, cap, where,
			   "must be an object of level, properties, from, to and person");
	if ((rc = check_scope(tx, pf, o, where, err, cap)) != 0)
		return rc;
	if (when_parse(str(o, "from"), &from, &abs_from) < 0 ||
	    when_parse(str(o, "to"), &to, &abs_to) < 0)
		return bad(err, cap, where,
			   "from and to must be wall times YYYY-MM-DDTHH:MM or RFC 3339 instants");
	if (abs_from != abs_to)
		return bad(err, cap, where, "from and to must both be wall times, or both instants");
	if (to <= from)
		return bad(err, cap, where, "to must be after from");
	snprintf(at, sizeof at, "%s.person", where);
	return check_person(json_object_get(o, "person"), at, err, cap);
}

/* Every property of the portfolio must have a time zone the rota can
 * read its wall times in. */
struct zones {
	struct store_tx *tx;
	const char *pf;
	char *err;
	size_t cap;
	int rc;
};

static void zone_of(void *arg, const char *id, const char *code)
{
	struct zones *z = arg;
	struct portfolio_property p;
	const struct tz *zone;
	int rc;

	(void)code;
	if (z->rc)
		return;
	rc = portfolio_property_get(z->tx, z->pf, id, &p);
	if (rc < 0)
		z->rc = rc;
	else if (rc == 1 && tz_get(p.timezone, &zone) < 0) {
		snprintf(z->err, z->cap,
			 "property %s has the time zone \"%s\", which this system does not know "
			 "(an IANA name such as Europe/Warsaw)",
			 id, p.timezone);
		z->rc = 1;
	}
}

int oncall_check(struct store_tx *tx, const char *pf, const json_t *doc, char *err, size_t cap)
{
	static const char *const keys[] = {"rotations", "overrides", NULL};
	const json_t *rot = json_object_get(doc, "rotations"),
		     *ovr = json_object_get(doc, "overrides");
	struct zones z = {tx, pf, err, cap, 0};
	const json_t *e;
	char where[48];
	size_t i;
	int rc;

	if (!json_is_object(doc) || !only_keys(doc, keys))
		return bad(err, cap, "the rota", "must be an object of rotations and overrides");
	if (!json_is_array(rot) || json_array_size(rot) > ONCALL_MAX_ROTATIONS)
		return bad(err, cap, "rotations", "must be a list of at most 100 rotations");
	if (ovr && (!json_is_array(ovr) || json_array_size(ovr) > ONCALL_MAX_OVERRIDES))
		return bad(err, cap, "overrides", "must be a list of at most 500 overrides");
	json_array_foreach(rot, i, e) {
		snprintf(where, sizeof where, "rotations[%zu]", i);
		if ((rc = check_rotation(tx, pf, e, where, err, cap)) != 0)
			return rc;
	}
	json_array_foreach(ovr, i, e) {
		snprintf(where, sizeof where, "overrides[%zu]", i);
		if ((rc = check_override(tx, pf, e, where, err, cap)) != 0)
			return rc;
	}
	if ((rc = portfolio_each_property(tx, pf, zone_of, &z)) < 0)
		return rc;
	return z.rc;
}
