/* dirlock: one server per data directory of an embedded (SQLite)
 * database, whose file no second server may share (docs/operations.md). */
#ifndef REVOPS_DIRLOCK_H
#define REVOPS_DIRLOCK_H
#include <stddef.h>
#include "core/common.h"

/* Takes an exclusive flock on <dir>/revopsd.lock (making dir, 0700, and
 * the file when missing) and writes this process's pid into it. The lock
 * is the kernel's: it ends with the process however that ends, so a
 * server killed with SIGKILL leaves nothing that blocks the next start.
 * Returns the descriptor that holds it (keep it open while serving), or
 * -1 with the reason in err, for example "data directory ./var is in use
 * by another revopsd (pid 4242)". */
int dirlock_take(const char *dir, char *err, size_t cap) WUR;

#endif
