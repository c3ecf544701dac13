#include "core/dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The pid the holder wrote into fd, or 0 when unknown. */
static long holder_pid(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof buf - 1, 0);

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

int dirlock_take(const char *dir, char *err, size_t cap)
{
	char path[1100], pid[32];
	long other;
	int fd, n;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, cap, "cannot create the data directory %s: %s", dir, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof path, "%s/revopsd.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, cap, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		other = errno == EWOULDBLOCK ? holder_pid(fd) : 0;
		if (errno != EWOULDBLOCK)
			snprintf(err, cap, "cannot lock %s: %s", path, strerror(errno));
		else if (other > 0)
			snprintf(err, cap, "data directory %s is in use by another revopsd (pid %ld)",
				 dir, other);
		else
			snprintf(err, cap, "data directory %s is in use by another revopsd", dir);
		close(fd);
		return -1;
	}
	n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		snprintf(err, cap, "cannot write %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}
