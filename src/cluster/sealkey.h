/* sealkey: the secret-sealing key (core/keyfile.h) held against the
 * database it seals for (issue 19; docs/operations.md, "The sealing
 * key"), the one owner of the key_checks table.
 *
 * The database records its key's check value the first time a key is
 * used with it. From then on a process that starts with another key, or
 * with none, refuses to start and changes nothing: restoring a backup
 * without its key, a data directory that lost its key, or a node with a
 * key of its own would otherwise seal new secrets under a key the others
 * cannot open, and every old one would fail. A key is made only for a
 * database that has no check value yet (a new one). */
#ifndef REVOPS_SEALKEY_H
#define REVOPS_SEALKEY_H
#include "core/common.h"

struct store;

/* The key of data_dir for st's database, made when both have none.
 * Returns 0, or -1 (logged: which key the database expects, and how to
 * restore it) with nothing changed. */
int sealkey_load(struct store *st, const char *data_dir, unsigned char key[32]) WUR;

#endif
