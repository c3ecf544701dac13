/* keyfile: the server's secret-sealing key, a file beside the database
 * (<data-dir>/revops.key, 32 random bytes, mode 0600) made at first start.
 * Keeping it out of the database means a copy of the database alone does
 * not reveal webhook signing secrets; back the two up separately. */
#ifndef REVOPS_KEYFILE_H
#define REVOPS_KEYFILE_H
#include "core/common.h"

/* Loads the key, creating the file when it does not exist. Returns 0, or
 * -1 (logged) when it cannot be read or made, or has the wrong size. */
int keyfile_load(const char *data_dir, unsigned char key[32]) WUR;

#endif
