#include "core/signals.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

void signals_block(sigset_t *set)
{
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	pthread_sigmask(SIG_BLOCK, set, NULL);
}

int signals_wait(const sigset_t *set, void (*tick)(void *arg), void *arg)
{
	struct timespec second = {1, 0};
	int sig;

	for (;;) {
		sig = sigtimedwait(set, NULL, &second);
		if (sig == SIGTERM || sig == SIGINT)
			return sig;
		if (sig < 0 && errno != EAGAIN && errno != EINTR) {
			log_msg(LOG_ERROR, "signals", "sigtimedwait: %s", strerror(errno));
			return -1;
		}
		if (tick)
			tick(arg);
	}
}
