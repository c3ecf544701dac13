/* A main() for the fuzz drivers outside libFuzzer: runs
 * LLVMFuzzerTestOneInput once over every regular file in the directories
 * (or files) named on the command line, so the seed corpora and the crash
 * inputs in fuzz/<target>/regressions/ are replayed by ctest in the normal
 * and the sanitizer builds. A directory that does not exist counts as
 * empty (a target may have no regressions yet); any other error, or no
 * input at all, fails. A driver's abort() or a sanitizer report fails the
 * test the way it fails a fuzzing run. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Runs the driver over the file at path. Returns 0, or -1 when it cannot
 * be read. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	long len;
	int rc = -1;

	if (!f)
		goto out;
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		goto out;
	/* An exact-size copy, so ASan sees a read one past the input. */
	data = malloc(len ? (size_t)len : 1);
	if (!data || (len && fread(data, 1, (size_t)len, f) != (size_t)len))
		goto out;
	/* Named first, so the input that aborts is the last line shown. */
	printf("replay: %s\n", path);
	fflush(stdout);
	LLVMFuzzerTestOneInput(data, (size_t)len);
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "replay: cannot read %s\n", path);
	free(data);
	if (f)
		fclose(f);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays every regular file in dir, in name order. Returns how many, or
 * -1 on an error. */
static int replay_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	char **names = NULL, **grown, path[4096];
	size_t n = 0, cap = 0, i;
	int count = 0;

	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			grown = realloc(names, cap * sizeof *names);
			if (!grown)
				goto fail;
			names = grown;
		}
		if (!(names[n] = strdup(e->d_name)))
			goto fail;
		n++;
	}
	qsort(names, n, sizeof *names, by_name);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		if (stat(path, &st) != 0)
			goto fail;
		if (!S_ISREG(st.st_mode))
			continue;
		if (replay_file(path) < 0)
			goto fail;
		count++;
	}
	goto out;
fail:
	count = -1;
out:
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return count;
}

int main(int argc, char **argv)
{
	struct stat st;
	int i, n, total = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++) {
		if (stat(argv[i], &st) == 0 && S_ISREG(st.st_mode))
			n = replay_file(argv[i]) < 0 ? -1 : 1;
		else
			n = replay_dir(argv[i]);
		if (n < 0) {
			fprintf(stderr, "replay: cannot replay %s\n", argv[i]);
			return 1;
		}
		printf("replay: %d input(s) from %s\n", n, argv[i]);
		total += n;
	}
	if (total == 0) {
		fprintf(stderr, "replay: no inputs\n");
		return 1;
	}
	return 0;
}
