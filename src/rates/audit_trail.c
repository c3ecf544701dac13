#include "rates/audit_trail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/crypto.h"
#include "store/store.h"

/* The statements of one kind of trail: a rate decision's (audit_entries)
 * or a rate suggestion's (suggestion_audit_entries, "rs_" ids). */
struct trail_sql {
	const char *key; /* the subject's field in audit_load's answer */
	const char *tip, *insert, *load;
};

static const struct trail_sql decision_trail = {
	"decision_id",
	"SELECT seq, hash FROM audit_entries WHERE decision_id = $1 ORDER BY seq DESC LIMIT 1",
	"INSERT INTO audit_entries (decision_id, seq, at, kind, actor, details, prev_hash, hash)",
	"SELECT seq, at, kind, actor, details, prev_hash, hash FROM audit_entries"
	" WHERE decision_id = $1 ORDER BY seq",
};

static const struct trail_sql suggestion_trail = {
	"suggestion_id",
	"SELECT seq, hash FROM suggestion_audit_entries WHERE suggestion_id = $1"
	" ORDER BY seq DESC LIMIT 1",
	"INSERT INTO suggestion_audit_entries (suggestion_id, seq, at, kind, actor, details,"
	" prev_hash, hash)",
	"SELECT seq, at, kind, actor, details, prev_hash, hash FROM suggestion_audit_entries"
	" WHERE suggestion_id = $1 ORDER BY seq",
};

static const struct trail_sql *trail_of(const char *id)
{
	return strncmp(id, "rs_", 3) ? &decision_trail : &suggestion_trail;
}

int audit_open(struct store_tx *tx, const char *decision_id, struct audit_chain *ch)
{
	struct store_rows *r;
	int rc;

	memset(ch, 0, sizeof *ch);
	snprintf(ch->decision_id, sizeof ch->decision_id, "%s", decision_id);
	snprintf(ch->head, sizeof ch->head, "%s", AUDIT_GENESIS);
	rc = store_query(tx, trail_of(decision_id)->tip, (struct store_val[]){sv_text(decision_id)},
			 1, &r);
	if (rc != STORE_OK)
		return rc;
	rc = store_next(r);
	if (rc == 1) {
		ch->seq = store_int(r, 0);
		snprintf(ch->head, sizeof ch->head, "%s", store_text(r, 1));
	}
	store_rows_close(r);
	return rc < 0 ? rc : 0;
}

/* The canonical text of a JSON value: sorted keys, no whitespace, every
 * non-ASCII character as a \uXXXX escape with lowercase hex, i.e. what
 * Python's json.dumps(v, sort_keys=True, separators=(",", ":"),
 * ensure_ascii=True) prints. jansson writes uppercase hex, so escapes are
 * lowercased here, one escape at a time (a literal backslash is itself
 * escaped, so "\\u" is never taken for an escape). free() the result. */
static char *canonical(const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
	size_t i, k;

	for (i = 0; s && s[i]; i++) {
		if (s[i] != '\\')
			continue;
		i++;
		if (s[i] == 'u')
			for (k = 1; k <= 4 && s[i + k]; k++)
				if (s[i + k] >= 'A' && s[i + k] <= 'F')
					s[i + k] = (char)(s[i + k] - 'A' + 'a');
	}
	return s;
}

/* The hash of an entry whose details are already canonical text: the
 * canonical entry is assembled around them (keys in sorted order: actor,
 * at, details, kind, seq), so details are serialised once. */
static void hash_canonical(const char *prev_hash, int64_t seq, const char *at, const char *kind,
			   const char *actor, const char *details_canon, char out[65])
{
	json_t *ja = json_string(actor), *jt = json_string(at), *jk = json_string(kind);
	char *ca = ja ? canonical(ja) : NULL, *ct = jt ? canonical(jt) : NULL;
	char *ck = jk ? canonical(jk) : NULL;
	struct buf b;

	buf_init(&b, 0);
	if (!ca || !ct || !ck ||
	    buf_printf(&b, "%s:{\"actor\":%s,\"at\":%s,\"details\":%s,\"kind\":%s,\"seq\":%lld}",
		       prev_hash, ca, ct, details_canon, ck, (long long)seq) < 0) {
		memset(out, 'x', 64); /* never a valid hash: the chain reads invalid */
		out[64] = '\0';
	} else {
		crypto_sha256_hex(b.data, b.len, out);
	}
	buf_free(&b);
	free(ca);
	free(ct);
	free(ck);
	json_decref(ja);
	json_decref(jt);
	json_decref(jk);
}

void audit_entry_hash(const char *prev_hash, int64_t seq, const char *at, const char *kind,
		      const char *actor, const json_t *details, char out[65])
{
	char *d = canonical(details);

	if (!d) {
		memset(out, 'x', 64);
		out[64] = '\0';
		return;
	}
	hash_canonical(prev_hash, seq, at, kind, actor, d, out);
	free(d);
}

int audit_prepare(struct audit_chain *ch, const char *kind, const char *actor,
		  const json_t *details, int64_t at_ms, struct audit_entry *e)
{
	char at[CLOCK_RFC3339_LEN];

	memset(e, 0, sizeof *e);
	if (strlen(kind) >= sizeof e->kind || strlen(actor) >= sizeof e->actor)
		return -1;
	e->details = canonical(details);
	if (!e->details)
		return -1;
	e->seq = ch->seq + 1;
	e->at_ms = at_ms;
	memcpy(e->kind, kind, strlen(kind) + 1);
	memcpy(e->actor, actor, strlen(actor) + 1);
	memcpy(e->prev, ch->head, sizeof e->prev);
	clock_format_ms(at_ms, at);
	hash_canonical(e->prev, e->seq, at, kind, actor, e->details, e->hash);
	ch->seq = e->seq;
	memcpy(ch->head, e->hash, sizeof ch->head);
	return 0;
}

int audit_insert(struct store_tx *tx, const char *decision_id, const struct audit_entry *e, size_t n)
{
	int rc = 0;

	/* Kept and sent as multi-row statements (store_send_row), also across
	 * the trails of several subjects written in one transaction. */
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = store_send_row(tx, trail_of(decision_id)->insert, "", 8,
				    (struct store_val[]){sv_text(decision_id), sv_int(e[i].seq),
							 sv_int(e[i].at_ms), sv_text(e[i].kind),
							 sv_text(e[i].actor), sv_text(e[i].details),
							 sv_text(e[i].prev), sv_text(e[i].hash)});
	return rc < 0 ? rc : 0;
}

void audit_entry_free(struct audit_entry *e)
{
	free(e->details);
	e->details = NULL;
}

int audit_append(struct store_tx *tx, struct audit_chain *ch, const char *kind, const char *actor,
		 const json_t *details, int64_t at_ms)
{
	struct audit_chain next = *ch;
	struct audit_entry e;
	int rc;

	if (audit_prepare(&next, kind, actor, details, at_ms, &e) < 0)
		return STORE_ERR;
	rc = audit_insert(tx, ch->decision_id, &e, 1);
	audit_entry_free(&e);
	if (rc < 0)
		return rc;
	*ch = next;
	return 0;
}

int audit_entries_valid(const json_t *entries)
{
	char expect_prev[65] = AUDIT_GENESIS, hash[65];
	const json_t *e;
	size_t i;

	json_array_foreach(entries, i, e) {
		const char *prev = json_string_value(json_object_get(e, "prev_hash"));
		const char *stored = json_string_value(json_object_get(e, "hash"));
		const char *at = json_string_value(json_object_get(e, "at"));
		const char *kind = json_string_value(json_object_get(e, "kind"));
		const char *actor = json_string_value(json_object_get(e, "actor"));
		json_t *seq = json_object_get(e, "seq");

		if (!prev || !stored || !at || !kind || !actor || !json_is_integer(seq) ||
		    json_integer_value(seq) != (json_int_t)i + 1 || strcmp(prev, expect_prev))
			return 0;
		audit_entry_hash(prev, json_integer_value(seq), at, kind, actor,
				 json_object_get(e, "details"), hash);
		if (strcmp(hash, stored))
			return 0;
		memcpy(expect_prev, hash, sizeof expect_prev);
	}
	return 1;
}

int audit_load(struct store_tx *tx, const char *decision_id, json_t **out)
{
	struct store_rows *r;
	json_t *entries = json_array(), *details;
	char at[CLOCK_RFC3339_LEN], head[65] = AUDIT_GENESIS;
	int rc;

	*out = NULL;
	rc = store_query(tx, trail_of(decision_id)->load,
			 (struct store_val[]){sv_text(decision_id)}, 1, &r);
	if (rc != STORE_OK) {
		json_decref(entries);
		return rc;
	}
	while ((rc = store_next(r)) == 1) {
		clock_format_ms(store_int(r, 1), at);
		details = json_loads(store_text(r, 4), 0, NULL);
		json_array_append_new(entries,
				      json_pack("{s:I, s:s, s:s, s:s, s:o, s:s, s:s}", "seq",
						(json_int_t)store_int(r, 0), "at", at, "kind",
						store_text(r, 2), "actor", store_text(r, 3), "details",
						details ? details : json_null(), "prev_hash",
						store_text(r, 5), "hash", store_text(r, 6)));
		snprintf(head, sizeof head, "%s", store_text(r, 6));
	}
	store_rows_close(r);
	if (rc < 0 || !json_array_size(entries)) {
		json_decref(entries);
		return rc < 0 ? rc : 0;
	}
	*out = json_pack("{s:s, s:o, s:s, s:b}", trail_of(decision_id)->key, decision_id, "entries",
			 entries, "head_hash", head, "chain_valid", audit_entries_valid(entries));
	return 1;
}
