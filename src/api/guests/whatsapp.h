/* whatsapp: the webhook Meta's Cloud API calls (issue 16;
 * docs/guest-messaging.md, "WhatsApp"): the subscription handshake and
 * the signed notifications. Public routes: Meta authenticates with the
 * verify token and the X-Hub-Signature-256 of each body. */
#ifndef REVOPS_API_WHATSAPP_H
#define REVOPS_API_WHATSAPP_H

struct route_table;

extern const struct route_table whatsapp_routes;

#endif
