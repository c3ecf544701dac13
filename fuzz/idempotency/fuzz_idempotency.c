/* libFuzzer driver for the Idempotency-Key middleware (idempotency.h) as
 * pipeline.c runs it, against a real SQLite store in a temporary directory with
 * stored bodies sealed as in the server. The input's first line is the
 * Idempotency-Key header value, the rest the request body; the body is
 * also the response stored for the key (handlers echo input in errors).
 * Each input runs the whole life of a key and leaves the store empty:
 * claim, claim again while in flight, store the response, replay it, reuse
 * the key for another request, the same key for another principal and
 * portfolio, expiry.
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise is broken: a key is valid exactly when it is 1-255 printable
 * ASCII characters; a fingerprint is 64 hex digits and differs when the
 * path does; a fresh key proceeds, an in-flight one is 409, a stored one
 * replays its status, headers and body byte for byte (a body the seal
 * cannot take is not stored and the key stays in flight), another request
 * with it is a mismatch, another principal or portfolio is a different
 * key, and purging after the window removes every row. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "api/idempotency.h"
#include "store/store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T0 INT64_C(1780272000000)
#define WINDOW (INT64_C(72) * 3600 * 1000)

static struct store *st;
static char dir[64], db[128];

static void remove_store(void)
{
	static const char *const suffix[] = {"", "-wal", "-shm"};
	char p[160];
	size_t i;

	store_close(st);
	st = NULL;
	for (i = 0; i < sizeof suffix / sizeof *suffix; i++) {
		snprintf(p, sizeof p, "%s%s", db, suffix[i]);
		unlink(p);
	}
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const unsigned char seal[32] = {7, 1, 7, 1};
	char url[160];

	(void)argc;
	(void)argv;
	snprintf(dir, sizeof dir, "%s/revops-fuzz-idem-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir))
		abort();
	snprintf(db, sizeof db, "%s/revops.db", dir);
	snprintf(url, sizeof url, "sqlite:%s", db);
	if (store_open(url, 1, &st) != 0)
		abort();
	atexit(remove_store);
	idempotency_set_seal_key(seal);
	return 0;
}

static int key_rule(const char *key)
{
	size_t i;

	for (i = 0; key[i]; i++)
		if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
			return 0;
	return i >= 1 && i <= IDEMPOTENCY_KEY_MAX;
}

static void check_fingerprint(const char *fp)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!strchr("0123456789abcdef", fp[i]))
			abort();
	if (fp[64])
		abort();
}

static enum idem_action begin(const char *pf, const char *who, const char *key, const char *fp,
			      int64_t now, struct idem_stored *out)
{
	return idempotency_begin(st, pf, who, key, fp, now, WINDOW, out);
}

/* Stores body as the 201 of key, in a write transaction of its own.
 * Returns 0 or -1. */
static int store_key(const char *key, const json_t *headers, const uint8_t *body, size_t len)
{
	struct store_tx *tx;

	if (store_begin(st, STORE_WRITE, &tx) != STORE_OK)
		return -1;
	return store_finish(tx, idempotency_store(tx, "pf_1", "cli_1", key, 201, headers, body,
						  len)) == STORE_OK
		       ? 0
		       : -1;
}

/* The life of one key; body is also the response stored for it. */
static void run_key(const char *key, const uint8_t *body, size_t len)
{
	char fp[65], other[65];
	struct idem_stored out;
	json_t *headers = json_pack("{s:s}", "Location", "/v2/rate-decisions/rd_1");
	int stored;

	idempotency_fingerprint("POST", "/v2/rate-decisions", NULL, body, len, fp);
	idempotency_fingerprint("POST", "/v2/webhooks", NULL, body, len, other);
	check_fingerprint(fp);
	check_fingerprint(other);
	if (!strcmp(fp, other))
		abort();
	if (begin("pf_1", "cli_1", key, fp, T0, &out) != IDEM_PROCEED)
		abort();
	idempotency_stored_free(&out);
	if (begin("pf_1", "cli_1", key, fp, T0 + 1, &out) != IDEM_IN_PROGRESS)
		abort();
	idempotency_stored_free(&out);
	stored = store_key(key, headers, body, len) == 0;
	if (stored && memchr(body, '\0', len))
		abort(); /* the seal takes text: such a body is never stored */
	switch (begin("pf_1", "cli_1", key, fp, T0 + 2, &out)) {
	case IDEM_REPLAY:
		if (!stored || out.status != 201 || out.body.len != len ||
		    (len && memcmp(out.body.data, body, len)) || !json_equal(out.headers, headers))
			abort();
		break;
	case IDEM_IN_PROGRESS:
		if (stored)
			abort();
		break;
	default:
		abort();
	}
	idempotency_stored_free(&out);
	if (begin("pf_1", "cli_1", key, other, T0 + 3, &out) != IDEM_MISMATCH)
		abort();
	idempotency_stored_free(&out);
	if (begin("pf_1", "usr_1", key, fp, T0 + 4, &out) != IDEM_PROCEED ||
	    (idempotency_stored_free(&out), begin("pf_2", "cli_1", key, fp, T0 + 5, &out)) !=
		    IDEM_PROCEED)
		abort();
	idempotency_stored_free(&out);
	if (idempotency_purge(st, T0 + WINDOW + 10) != 3)
		abort();
	json_decref(headers);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t klen = nl ? (size_t)(nl - data) : size;
	char *key = malloc(klen + 1);

	if (!key)
		return 0;
	memcpy(key, data, klen);
	key[klen] = '\0';
	if (idempotency_key_valid(key) != key_rule(key))
		abort();
	if (key_rule(key))
		run_key(key, nl ? nl + 1 : data + size, nl ? size - klen - 1 : 0);
	free(key);
	return 0;
}
