#include "core/keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crypto.h"
#include "core/log.h"

#define CHECK_LABEL "revops sealing key check v1"

void keyfile_path(const char *data_dir, char *path, size_t cap)
{
	snprintf(path, cap, "%s/revops.key", data_dir);
}

int keyfile_read(const char *data_dir, unsigned char key[32])
{
	char path[1100];
	unsigned char extra;
	struct stat st;
	ssize_t n;
	int fd, rc = -1;

	keyfile_path(data_dir, path, sizeof path);
	if ((fd = open(path, O_RDONLY)) < 0) {
		if (errno == ENOENT)
			return 1;
		log_msg(LOG_ERROR, "keyfile", "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		log_msg(LOG_ERROR, "keyfile", "%s is not a regular file", path);
		goto out;
	}
	if (st.st_mode & 077) {
		log_msg(LOG_ERROR, "keyfile",
			"%s has mode %04o: others than its owner may read or change the key that"
			" seals every secret; chmod 600 it (and check who read it)",
			path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	n = read(fd, key, 32);
	if (n == 32 && read(fd, &extra, 1) == 0)
		rc = 0;
	else
		log_msg(LOG_ERROR, "keyfile", "%s is not a 32-byte key", path);
out:
	close(fd);
	return rc;
}

int keyfile_make(const char *data_dir, unsigned char key[32])
{
	char path[1100];
	int fd;

	keyfile_path(data_dir, path, sizeof path);
	/* O_EXCL: two processes starting at once cannot both make one. */
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0) {
		if (errno == EEXIST)
			return 1;
		log_msg(LOG_ERROR, "keyfile", "cannot make %s: %s", path, strerror(errno));
		return -1;
	}
	if (crypto_random(key, 32) < 0 || write(fd, key, 32) != 32 || fsync(fd) < 0) {
		log_msg(LOG_ERROR, "keyfile", "cannot write %s: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		crypto_wipe(key, 32);
		return -1;
	}
	close(fd);
	log_msg(LOG_INFO, "keyfile", "made the secret-sealing key %s", path);
	return 0;
}

void keyfile_unmake(const char *data_dir)
{
	char path[1100];

	keyfile_path(data_dir, path, sizeof path);
	unlink(path);
}

void keyfile_check(const unsigned char key[32], char out[KEYFILE_CHECK_LEN + 1])
{
	unsigned char mac[CRYPTO_SHA256_LEN];

	crypto_hmac_sha256(key, 32, CHECK_LABEL, strlen(CHECK_LABEL), mac);
	crypto_hex(mac, sizeof mac, out);
	crypto_wipe(mac, sizeof mac);
}
