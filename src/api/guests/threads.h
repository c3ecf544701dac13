/* threads: the guest thread routes (issue 16; docs/guest-messaging.md):
 * the list and one thread with its messages (guest-threads:read), and a
 * template message sent to the guest on WhatsApp (guest-threads:write). */
#ifndef REVOPS_API_THREADS_H
#define REVOPS_API_THREADS_H

struct route_table;

extern const struct route_table thread_routes;

#endif
