/* keyfile: the server's secret-sealing key, a file beside the database
 * (<data-dir>/revops.key, 32 random bytes, mode 0600). Keeping it out of
 * the database means a copy of the database alone does not reveal webhook
 * signing secrets; back the two up separately. Which key a database
 * expects is checked by cluster/sealkey.h (keyfile_check). */
#ifndef REVOPS_KEYFILE_H
#define REVOPS_KEYFILE_H
#include <stddef.h>
#include "core/common.h"

#define KEYFILE_CHECK_LEN 64 /* hex characters of a key's check value */

/* <data_dir>/revops.key into path (cap bytes). */
void keyfile_path(const char *data_dir, char *path, size_t cap);
/* Reads the key. Returns 0, 1 when there is no key file, or -1 (logged:
 * the path and the cause) when it cannot be read, is not a regular file
 * of 32 bytes, or others than its owner may read or write it (mode
 * bits 077, as ssh refuses such a private key). */
int keyfile_read(const char *data_dir, unsigned char key[32]) WUR;
/* Makes a new key file (never over an existing one) and returns its key.
 * Returns 0, 1 when a key file appeared meanwhile (read it), or -1
 * (logged: the path and the cause, e.g. a read-only directory). */
int keyfile_make(const char *data_dir, unsigned char key[32]) WUR;
/* Removes the key file keyfile_make just made (its key was refused). */
void keyfile_unmake(const char *data_dir);
/* The key's check value: the hex HMAC-SHA256 of a fixed label under the
 * key, which names the key without revealing it (out: KEYFILE_CHECK_LEN
 * + 1 bytes). */
void keyfile_check(const unsigned char key[32], char out[KEYFILE_CHECK_LEN + 1]);

#endif
