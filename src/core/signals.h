/* signals: the main-thread loop of a server process. The caller blocks
 * SIGTERM and SIGINT in every thread (before starting any), then waits
 * here; tick, when given, runs about once a second between waits. */
#ifndef REVOPS_SIGNALS_H
#define REVOPS_SIGNALS_H
#include <signal.h>

/* Blocks SIGTERM and SIGINT in the calling thread (and threads it starts
 * afterwards) and fills set with them. */
void signals_block(sigset_t *set);
/* Returns the signal that ended the wait (SIGTERM/SIGINT), or -1 when
 * waiting failed (logged). */
int signals_wait(const sigset_t *set, void (*tick)(void *arg), void *arg);

#endif
