/* audit_trail: the immutable, hash-chained audit trail of a rate decision
 * (API-CONTRACT §4) and of a rate suggestion (issue 15). A subject id
 * starting "rs_" names a suggestion, whose trail is kept in
 * suggestion_audit_entries; any other names a decision (audit_entries).
 * Both trails follow the rules below; audit_load names the subject
 * "suggestion_id" or "decision_id".
 *
 * Entry n's hash is lowercase hex SHA-256 of
 *     prev_hash ":" canonical-JSON({"actor","at","details","kind","seq"})
 * where prev_hash is entry n-1's hash (64 zeros for the first entry) and the
 * canonical JSON has sorted keys at every level, no whitespace, and every
 * non-ASCII character escaped as \uXXXX with lowercase hex: exactly Python's
 * json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True),
 * so anyone can recompute it. The
 * tables refuse UPDATE and DELETE (triggers in migrations 003 and 011). */
#ifndef REVOPS_AUDIT_TRAIL_H
#define REVOPS_AUDIT_TRAIL_H
#include <jansson.h>
#include <stdint.h>
#include "core/common.h"
#include "core/id.h"

struct store_tx;

#define AUDIT_GENESIS "0000000000000000000000000000000000000000000000000000000000000000"

/* The tip of one decision's chain, carried between appends. */
struct audit_chain {
	char decision_id[ID_MAX];
	int64_t seq;   /* of the last entry; 0 = empty */
	char head[65]; /* hash of the last entry, or AUDIT_GENESIS */
};

/* Reads the tip of decision_id's chain inside tx. Returns 0 or a negative
 * store status. */
int audit_open(struct store_tx *tx, const char *decision_id, struct audit_chain *ch) WUR;
/* One entry computed ahead of its insert, so the JSON and hashing work can
 * run outside the write lock (audit_prepare), leaving only the INSERT
 * (audit_insert) inside it. */
struct audit_entry {
	int64_t seq;
	int64_t at_ms;
	char kind[32];
	char actor[320];
	char *details; /* canonical JSON; owned */
	char prev[65];
	char hash[65];
};

/* Computes the next entry of ch (no I/O) and advances ch. Returns 0 or -1. */
int audit_prepare(struct audit_chain *ch, const char *kind, const char *actor,
		  const json_t *details, int64_t at_ms, struct audit_entry *e) WUR;
/* Inserts n prepared entries e[] of one decision inside tx (as few
 * statements as carry them). Returns 0 or a negative store status. */
int audit_insert(struct store_tx *tx, const char *decision_id, const struct audit_entry *e,
		 size_t n) WUR;
void audit_entry_free(struct audit_entry *e);
/* Appends one entry inside tx and advances ch. details is borrowed.
 * Returns 0 or a negative store status. */
int audit_append(struct store_tx *tx, struct audit_chain *ch, const char *kind, const char *actor,
		 const json_t *details, int64_t at_ms) WUR;
/* The hash of one entry (the formula above); at is the RFC 3339 string. */
void audit_entry_hash(const char *prev_hash, int64_t seq, const char *at, const char *kind,
		      const char *actor, const json_t *details, char out[65]);
/* Loads the trail as {"decision_id", "entries": [...], "head_hash",
 * "chain_valid"} with chain_valid recomputed from the stored fields.
 * Returns 1, 0 when the decision has no entries, or a negative store
 * status. */
int audit_load(struct store_tx *tx, const char *decision_id, json_t **out) WUR;
/* Recomputes a list of entries (as audit_load gives them): 1 when every
 * prev_hash links and every hash matches, else 0. */
int audit_entries_valid(const json_t *entries);

#endif
