#include "core/id.h"

#include <pthread.h>
#include <string.h>

#include "core/clock.h"
#include "core/crypto.h"

static const char CROCKFORD[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
static pthread_mutex_t id_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t last_ms = -1;
static unsigned char last_rand[10];

/* Adds one to the 80-bit big-endian number; returns 1 on overflow. */
static int incr80(unsigned char r[10])
{
	int i;

	for (i = 9; i >= 0; i--)
		if (++r[i] != 0)
			return 0;
	return 1;
}

int id_new(const char *prefix, char *out, size_t outcap)
{
	unsigned char raw[16];
	size_t plen = strlen(prefix);
	int64_t ms = clock_now_ms();
	int i, bit;

	if (plen + ID_BODY_LEN + 1 > outcap)
		return -1;
	pthread_mutex_lock(&id_lock);
	if (ms <= last_ms) {
		ms = last_ms;
		if (incr80(last_rand))
			ms = ++last_ms; /* 2^80 ids in one ms: move on a ms */
	}
	if (ms != last_ms) {
		if (crypto_random(last_rand, sizeof last_rand) < 0) {
			pthread_mutex_unlock(&id_lock);
			return -1;
		}
		/* A fresh draw keeps its top bit clear, leaving 2^79 increments
		 * of room within one ms before the carry moves to the next ms. */
		last_rand[0] &= 0x7f;
	}
	last_ms = ms;
	memcpy(raw + 6, last_rand, 10);
	pthread_mutex_unlock(&id_lock);
	for (i = 0; i < 6; i++)
		raw[i] = (unsigned char)(ms >> (40 - 8 * i));
	memcpy(out, prefix, plen);
	/* 128 bits as 26 base32 digits: the first digit holds the top 3 bits. */
	for (i = 0; i < ID_BODY_LEN; i++) {
		unsigned v = 0;
		int b;

		for (b = 0; b < 5; b++) {
			bit = i * 5 + b - 2; /* two leading zero bits pad to 130 */
			v <<= 1;
			if (bit >= 0)
				v |= (raw[bit / 8] >> (7 - bit % 8)) & 1;
		}
		out[plen + i] = CROCKFORD[v];
	}
	out[plen + ID_BODY_LEN] = '\0';
	return 0;
}

int id_valid(const char *prefix, const char *s)
{
	size_t plen = strlen(prefix), i;

	if (strncmp(s, prefix, plen) != 0 || strlen(s) != plen + ID_BODY_LEN)
		return 0;
	if (s[plen] > '7')
		return 0;
	for (i = plen; s[i]; i++)
		if (!strchr(CROCKFORD, s[i]))
			return 0;
	return 1;
}
