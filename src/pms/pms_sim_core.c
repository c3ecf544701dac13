#include "pms/pms_sim_core.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"
#include "core/id.h"

#define MAP_MIN_BUCKETS 64

/* A rate over the days from..to inclusive (day numbers since 1970-01-01). */
struct span {
	int64_t from, to;
	char currency[4];
	json_int_t minor_units;
};

/* The rates of one (property code, room type code): spans sorted by date,
 * disjoint. */
struct book {
	struct span *v;
	size_t n, cap;
};

/* The stored outcome of one idempotency key. */
struct idem {
	unsigned char fingerprint[CRYPTO_SHA256_LEN]; /* of the canonical request body */
	json_t *resp;                                 /* the 200 body answered the first time */
};

/* A chained hash map from NUL-terminated keys to owned values. */
struct map_entry {
	struct map_entry *next;
	uint64_t hash;
	char *key;
	void *val;
};

struct map {
	struct map_entry **b;
	size_t nb, n;
};

struct pms_sim {
	pthread_mutex_t mu;
	char **fail; /* failing property codes */
	size_t nfail;
	size_t capacity;  /* accepted writes kept at most */
	struct map books; /* book key -> struct book */
	struct map idems; /* code + idempotency key -> struct idem */
	json_t *written;  /* the accepted writes, oldest first */
};

/* A write whose body passed validation. */
struct write_req {
	const char *room_type_code, *from_s, *to_s, *currency, *key;
	int64_t from, to;
	json_int_t minor_units;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void *map_get(const struct map *m, const char *key)
{
	uint64_t h = hash_str(key);
	struct map_entry *e;

	if (!m->nb)
		return NULL;
	for (e = m->b[h % m->nb]; e; e = e->next)
		if (e->hash == h && !strcmp(e->key, key))
			return e->val;
	return NULL;
}

/* Doubles the bucket array when the map is fuller than one entry per
 * bucket. Failing to grow is harmless (chains just get longer). */
static void map_grow(struct map *m)
{
	struct map_entry **nbk, *e, *next;
	size_t nb = m->nb ? m->nb * 2 : MAP_MIN_BUCKETS, i;

	if (m->nb && m->n < m->nb)
		return;
	nbk = calloc(nb, sizeof *nbk);
	if (!nbk)
		return;
	for (i = 0; i < m->nb; i++)
		for (e = m->b[i]; e; e = next) {
			next = e->next;
			e->next = nbk[e->hash % nb];
			nbk[e->hash % nb] = e;
		}
	free(m->b);
	m->b = nbk;
	m->nb = nb;
}

/* Makes an entry for key (copied) and val, not yet in any map. NULL when
 * memory runs out. */
static struct map_entry *map_entry_new(const char *key, void *val)
{
	struct map_entry *e = calloc(1, sizeof *e);

	if (!e)
		return NULL;
	e->key = strdup(key);
	if (!e->key) {
		free(e);
		return NULL;
	}
	e->hash = hash_str(key);
	e->val = val;
	return e;
}

/* Makes sure m has a bucket array, so that map_link() cannot fail. */
static int map_reserve(struct map *m)
{
	map_grow(m);
	return m->nb ? 0 : -1;
}

/* Links a prepared entry whose key is not in m yet; needs map_reserve()
 * first. */
static void map_link(struct map *m, struct map_entry *e)
{
	map_grow(m);
	e->next = m->b[e->hash % m->nb];
	m->b[e->hash % m->nb] = e;
	m->n++;
}

static void map_free(struct map *m, void (*free_val)(void *))
{
	struct map_entry *e, *next;
	size_t i;

	for (i = 0; i < m->nb; i++)
		for (e = m->b[i]; e; e = next) {
			next = e->next;
			free_val(e->val);
			free(e->key);
			free(e);
		}
	free(m->b);
	memset(m, 0, sizeof *m);
}

static void book_free(void *p)
{
	struct book *b = p;

	free(b->v);
	free(b);
}

static void idem_free(void *p)
{
	struct idem *i = p;

	json_decref(i->resp);
	free(i);
}

/* "<strlen(a)>:<a><b>": an unambiguous key for the pair (a, b). Returns a
 * malloc'd string or NULL. */
static char *pair_key(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = la + lb + 24;
	char *k = malloc(n);

	if (k)
		snprintf(k, n, "%zu:%s%s", la, a, b);
	return k;
}

/* Index of the first span whose last day is >= day (n when none). */
static size_t book_lower(const struct book *b, int64_t day)
{
	size_t lo = 0, hi = b->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (b->v[mid].to < day)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The span holding day, or NULL. */
static const struct span *book_find(const struct book *b, int64_t day)
{
	size_t i = book_lower(b, day);

	return i < b->n && b->v[i].from <= day ? &b->v[i] : NULL;
}

/* Makes room for two more spans, the most one write can add. */
static int book_reserve(struct book *b)
{
	struct span *v;
	size_t cap;

	if (b->n + 2 <= b->cap)
		return 0;
	cap = b->cap ? b->cap * 2 : 4;
	v = realloc(b->v, cap * sizeof *v);
	if (!v)
		return -1;
	b->v = v;
	b->cap = cap;
	return 0;
}

/* Sets every day of ns->from..ns->to to ns's rate: the spans it overlaps
 * are replaced by what is left of the first one before it, ns, and what is
 * left of the last one after it. Needs book_reserve() first; cannot fail. */
static void book_set(struct book *b, const struct span *ns)
{
	struct span rep[3];
	size_t lo = book_lower(b, ns->from), hi = lo, k = 0;

	while (hi < b->n && b->v[hi].from <= ns->to)
		hi++;
	if (lo < hi && b->v[lo].from < ns->from) {
		rep[k] = b->v[lo];
		rep[k++].to = ns->from - 1;
	}
	rep[k++] = *ns;
	if (lo < hi && b->v[hi - 1].to > ns->to) {
		rep[k] = b->v[hi - 1];
		rep[k++].from = ns->to + 1;
	}
	memmove(b->v + lo + k, b->v + hi, (b->n - hi) * sizeof *b->v);
	memcpy(b->v + lo, rep, k * sizeof *rep);
	b->n = b->n - (hi - lo) + k;
}

static json_t *error_obj(const char *msg)
{
	return json_pack("{s:s}", "error", msg);
}

/* Code points of a valid UTF-8 string (jansson only holds valid UTF-8). */
static size_t utf8_chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* Fetches the non-empty string field name of obj (called path in messages)
 * into *out; max_chars > 0 also caps its length. Returns NULL, or the 400
 * message (written into msg). */
static const char *get_string(const json_t *obj, const char *path, const char *name,
			      size_t max_chars, const char **out, char *msg, size_t msgcap)
{
	const json_t *v = json_object_get(obj, name);

	if (!v)
		snprintf(msg, msgcap, "%s is required", path);
	else if (!json_is_string(v))
		snprintf(msg, msgcap, "%s must be a string", path);
	else if (strlen(json_string_value(v)) != json_string_length(v))
		snprintf(msg, msgcap, "%s must not contain NUL characters", path);
	else if (!json_string_length(v))
		snprintf(msg, msgcap, "%s must not be empty", path);
	else if (max_chars && utf8_chars(json_string_value(v)) > max_chars)
		snprintf(msg, msgcap, "%s must be at most %zu characters", path, max_chars);
	else {
		*out = json_string_value(v);
		return NULL;
	}
	return msg;
}

/* Writes "<prefix><key> is not a known field" into msg, the key cut to at
 * most 64 bytes at a character boundary (with "..."), so the message stays
 * short and valid UTF-8. Returns msg. */
static const char *unknown_msg(const char *prefix, const char *key, char *msg, size_t cap)
{
	size_t len = strlen(key), keep = len;

	if (keep > 64) {
		keep = 64;
		while (keep && ((unsigned char)key[keep] & 0xc0) == 0x80)
			keep--;
	}
	snprintf(msg, cap, "%s%.*s%s is not a known field", prefix, (int)keep, key,
		 keep < len ? "..." : "");
	return msg;
}

/* Names the first key of obj not in allowed (NULL-terminated), or NULL. */
static const char *unknown_key(const json_t *obj, const char *const *allowed)
{
	const char *k;
	const json_t *v;
	size_t i;

	json_object_foreach((json_t *)obj, k, v) {
		for (i = 0; allowed[i] && strcmp(allowed[i], k); i++)
			;
		if (!allowed[i])
			return k;
	}
	return NULL;
}

/* Checks the request body and fills w (pointers into req). Returns NULL or
 * the 400 message (a literal or held in msg). Fields are checked in protocol order, then
 * unknown keys, so one body always gets the same message. */
static const char *check_request(const json_t *req, struct write_req *w, char *msg, size_t cap)
{
	static const char *const top[] = {"room_type_code",  "from", "to", "rate",
					  "idempotency_key", NULL};
	static const char *const money[] = {"currency", "minor_units", NULL};
	const json_t *rate, *mu;
	const char *bad, *c;

	if (!json_is_object(req))
		return "the request body must be a JSON object";
	if ((bad = get_string(req, "room_type_code", "room_type_code", PMS_SIM_MAX_STRING,
			      &w->room_type_code, msg, cap)) ||
	    (bad = get_string(req, "from", "from", 0, &w->from_s, msg, cap)))
		return bad;
	if (clock_parse_date(w->from_s, &w->from) < 0)
		return "from must be a date YYYY-MM-DD";
	if ((bad = get_string(req, "to", "to", 0, &w->to_s, msg, cap)))
		return bad;
	if (clock_parse_date(w->to_s, &w->to) < 0)
		return "to must be a date YYYY-MM-DD";
	if (w->to < w->from)
		return "to must not be before from";
	if (w->to - w->from + 1 > PMS_SIM_MAX_DAYS) {
		snprintf(msg, cap, "from..to covers %lld days; at most %d are allowed",
			 (long long)(w->to - w->from + 1), PMS_SIM_MAX_DAYS);
		return msg;
	}
	rate = json_object_get(req, "rate");
	if (!rate)
		return "rate is required";
	if (!json_is_object(rate))
		return "rate must be an object";
	if ((bad = get_string(rate, "rate.currency", "currency", 0, &w->currency, msg, cap)))
		return bad;
	for (c = w->currency; *c >= 'A' && *c <= 'Z'; c++)
		;
	if (*c || c - w->currency != 3)
		return "rate.currency must be 3 uppercase letters (ISO 4217)";
	mu = json_object_get(rate, "minor_units");
	if (!mu)
		return "rate.minor_units is required";
	if (!json_is_integer(mu) || json_integer_value(mu) <= 0)
		return "rate.minor_units must be a positive integer";
	w->minor_units = json_integer_value(mu);
	if ((bad = unknown_key(rate, money)))
		return unknown_msg("rate.", bad, msg, cap);
	if ((bad = get_string(req, "idempotency_key", "idempotency_key", PMS_SIM_MAX_STRING,
			      &w->key, msg, cap)))
		return bad;
	if ((bad = unknown_key(req, top)))
		return unknown_msg("", bad, msg, cap);
	return NULL;
}

static int is_failing(const struct pms_sim *s, const char *code)
{
	size_t i;

	for (i = 0; i < s->nfail; i++)
		if (!strcmp(s->fail[i], code))
			return 1;
	return 0;
}

struct pms_sim *pms_sim_new(const char *fail_codes)
{
	struct pms_sim *s = calloc(1, sizeof *s);
	const char *p = fail_codes ? fail_codes : "";
	size_t len;

	if (!s)
		return NULL;
	pthread_mutex_init(&s->mu, NULL);
	s->capacity = PMS_SIM_CAPACITY;
	s->written = json_array();
	if (!s->written)
		goto fail;
	while (*p) {
		len = strcspn(p, ",");
		if (len) {
			char **nf = realloc(s->fail, (s->nfail + 1) * sizeof *nf);

			if (!nf)
				goto fail;
			s->fail = nf;
			s->fail[s->nfail] = strndup(p, len);
			if (!s->fail[s->nfail])
				goto fail;
			s->nfail++;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return s;
fail:
	pms_sim_free(s);
	return NULL;
}

void pms_sim_free(struct pms_sim *s)
{
	size_t i;

	if (!s)
		return;
	map_free(&s->books, book_free);
	map_free(&s->idems, idem_free);
	json_decref(s->written);
	for (i = 0; i < s->nfail; i++)
		free(s->fail[i]);
	free(s->fail);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void pms_sim_set_capacity(struct pms_sim *s, size_t n)
{
	pthread_mutex_lock(&s->mu);
	s->capacity = n ? n : PMS_SIM_CAPACITY;
	pthread_mutex_unlock(&s->mu);
}

static json_t *money_obj(const char *currency, json_int_t minor_units)
{
	return json_pack("{s:s,s:I}", "currency", currency, "minor_units", minor_units);
}

/* What apply_write makes before it changes anything. The book b is in
 * s->books unless it is nb (new, with its entry be); idem's entry is ie.
 * commit_write hands them to the simulator; release_staged frees what it
 * did not take. */
struct staged {
	char *bkey;
	struct book *b, *nb;
	struct map_entry *be, *ie;
	struct idem *idem;
	json_t *prev, *out, *entry;
};

/* Finds or makes the book of (code, w->room_type_code) in st and reserves
 * room in both maps, so commit_write cannot fail. Returns 0 or -1 (out of
 * memory). */
static int stage_book(struct pms_sim *s, const char *code, const struct write_req *w,
		      struct staged *st)
{
	st->bkey = pair_key(code, w->room_type_code);
	if (!st->bkey || map_reserve(&s->books) < 0 || map_reserve(&s->idems) < 0)
		return -1;
	st->b = map_get(&s->books, st->bkey);
	if (!st->b) {
		st->b = st->nb = calloc(1, sizeof *st->nb);
		st->be = st->nb ? map_entry_new(st->bkey, st->nb) : NULL;
		if (!st->be)
			return -1;
	}
	return 0;
}

/* Makes the idempotency record for idem_key, room for the new span, a
 * pms_ref, the response (st->out: pms_ref, previous_rate, at) and the
 * log entry (st->entry). Returns 0 or -1 (out of memory, or no pms_ref). */
static int stage_records(const char *code, const struct write_req *w, const char *idem_key,
			 struct staged *st)
{
	char ref[ID_MAX], at[CLOCK_RFC3339_LEN];
	const struct span *old;

	st->idem = calloc(1, sizeof *st->idem);
	st->ie = st->idem ? map_entry_new(idem_key, st->idem) : NULL;
	if (!st->ie || book_reserve(st->b) < 0 || id_new("pms_", ref, sizeof ref) < 0)
		return -1;
	clock_format_ms(clock_now_ms(), at);
	old = book_find(st->b, w->from);
	st->prev = old ? money_obj(old->currency, old->minor_units) : json_null();
	if (!st->prev)
		return -1;
	st->out = json_pack("{s:s,s:O,s:s}", "pms_ref", ref, "previous_rate", st->prev, "at", at);
	st->entry = json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:s,s:s,s:O}", "property_code", code,
			      "room_type_code", w->room_type_code, "from", w->from_s, "to", w->to_s,
			      "rate", money_obj(w->currency, w->minor_units), "idempotency_key",
			      w->key, "pms_ref", ref, "at", at, "previous_rate", st->prev);
	return st->out && st->entry ? 0 : -1;
}

/* Links the staged book and idempotency record (with fingerprint) into s
 * and sets the rate over w's days. Cannot fail; st keeps only what the
 * simulator does not own. */
static void commit_write(struct pms_sim *s, const struct write_req *w,
			 const unsigned char *fingerprint, struct staged *st)
{
	struct span ns;

	if (st->be)
		map_link(&s->books, st->be);
	st->be = NULL;
	st->nb = NULL;
	memcpy(st->idem->fingerprint, fingerprint, sizeof st->idem->fingerprint);
	st->idem->resp = st->out;
	st->out = NULL;
	map_link(&s->idems, st->ie);
	st->ie = NULL;
	st->idem = NULL;
	ns = (struct span){w->from, w->to, {0}, w->minor_units};
	memcpy(ns.currency, w->currency, sizeof ns.currency);
	book_set(st->b, &ns);
}

/* Frees what st still owns. */
static void release_staged(struct staged *st)
{
	if (st->be) {
		free(st->be->key);
		free(st->be);
	}
	if (st->ie) {
		free(st->ie->key);
		free(st->ie);
	}
	if (st->nb)
		book_free(st->nb);
	free(st->idem);
	json_decref(st->prev);
	json_decref(st->out);
	json_decref(st->entry);
	free(st->bkey);
}

/* Applies a validated, new write under s->mu. Everything that can fail
 * (allocations, the pms_ref) happens before the first change, so a failure
 * leaves the simulator as it was. Returns 200 with the response in *resp,
 * or 500 (out of memory) with *resp NULL. */
static int apply_write(struct pms_sim *s, const char *code, const struct write_req *w,
		       const char *idem_key, const unsigned char *fingerprint, json_t **resp)
{
	struct staged st = {0};
	int status = 500;

	*resp = NULL;
	if (stage_book(s, code, w, &st) < 0 || stage_records(code, w, idem_key, &st) < 0)
		goto out;
	*resp = json_deep_copy(st.out);
	if (!*resp || json_array_append(s->written, st.entry) < 0)
		goto out;
	/* Committed: nothing below can fail. */
	commit_write(s, w, fingerprint, &st);
	status = 200;
out:
	if (status != 200) {
		json_decref(*resp);
		*resp = NULL;
	}
	release_staged(&st);
	return status;
}

/* Checks the property code of a write. Returns NULL, or the 400 message. */
static const char *check_code(const char *code)
{
	if (!code || !*code)
		return "the property code is empty";
	if (utf8_chars(code) > PMS_SIM_MAX_STRING)
		return "the property code is longer than 255 characters";
	return NULL;
}

/* The answer to a write whose idempotency key was seen before: a copy of
 * the first answer (200) when fingerprint fp matches, else 409. Returns
 * the status with *resp set, or -1 when out of memory (*resp NULL). */
static int answer_repeat(const struct idem *seen, const unsigned char *fp, json_t **resp)
{
	if (memcmp(seen->fingerprint, fp, sizeof seen->fingerprint) != 0) {
		*resp = error_obj("idempotency key reused with a different request");
		return 409;
	}
	*resp = json_deep_copy(seen->resp);
	return *resp ? 200 : -1;
}

int pms_sim_write(struct pms_sim *s, const char *code, const json_t *req, json_t **resp)
{
	struct write_req w;
	struct idem *seen;
	unsigned char fp[CRYPTO_SHA256_LEN];
	char msg[256], *ikey = NULL, *dump = NULL;
	const char *bad = check_code(code);
	int status = 500;

	*resp = NULL;
	pthread_mutex_lock(&s->mu);
	if (!bad && is_failing(s, code)) {
		status = 500;
		*resp = error_obj("injected failure");
		goto out;
	}
	if (!bad)
		bad = check_request(req, &w, msg, sizeof msg);
	if (bad) {
		status = 400;
		*resp = error_obj(bad);
		goto out;
	}
	/* Only the known fields are present, so the sorted dump is canonical. */
	ikey = pair_key(code, w.key);
	dump = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS);
	if (!ikey || !dump)
		goto oom;
	crypto_sha256(dump, strlen(dump), fp);
	seen = map_get(&s->idems, ikey);
	if (seen) {
		status = answer_repeat(seen, fp, resp);
		if (status < 0)
			goto oom;
		goto out;
	}
	if (json_array_size(s->written) >= s->capacity) {
		status = 503;
		*resp = error_obj("simulator full");
		goto out;
	}
	status = apply_write(s, code, &w, ikey, fp, resp);
	if (status == 200)
		goto out;
oom:
	status = 500;
	*resp = error_obj("out of memory");
out:
	pthread_mutex_unlock(&s->mu);
	free(ikey);
	free(dump);
	return status;
}

json_t *pms_sim_written(struct pms_sim *s)
{
	json_t *arr = json_array(), *v;
	size_t i;

	if (!arr)
		return NULL;
	pthread_mutex_lock(&s->mu);
	json_array_foreach(s->written, i, v) {
		if (json_array_append_new(arr, json_deep_copy(v)) < 0) {
			json_decref(arr);
			arr = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return arr;
}
