#include "core/keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crypto.h"
#include "core/log.h"

int keyfile_load(const char *data_dir, unsigned char key[32])
{
	char path[1100];
	unsigned char fresh[32], extra;
	ssize_t n;
	int fd, rc = -1;

	snprintf(path, sizeof path, "%s/revops.key", data_dir);
	fd = open(path, O_RDONLY);
	if (fd < 0 && errno == ENOENT) {
		/* O_EXCL: two processes starting at once cannot both make one. */
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (fd >= 0) {
			if (crypto_random(fresh, sizeof fresh) < 0 ||
			    write(fd, fresh, sizeof fresh) != (ssize_t)sizeof fresh || fsync(fd) < 0) {
				close(fd);
				unlink(path);
				log_msg(LOG_ERROR, "keyfile", "cannot write %s", path);
				crypto_wipe(fresh, sizeof fresh);
				return -1;
			}
			close(fd);
			crypto_wipe(fresh, sizeof fresh);
			log_msg(LOG_INFO, "keyfile", "made the secret-sealing key %s", path);
		}
		fd = open(path, O_RDONLY);
	}
	if (fd < 0) {
		log_msg(LOG_ERROR, "keyfile", "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	n = read(fd, key, 32);
	if (n == 32 && read(fd, &extra, 1) == 0)
		rc = 0;
	else
		log_msg(LOG_ERROR, "keyfile", "%s is not a 32-byte key", path);
	close(fd);
	return rc;
}
