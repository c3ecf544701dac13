// A typed client for revops, as an API user would write it: types generated
// by openapi-typescript from the document a running revopsd serves (into
// ./revops-api.d.ts beside this file, by t/api/pipeline/test_openapi_tools.py),
// requests made with openapi-fetch, checked by `tsc --strict --noEmit`. It is
// compiled, never run.
//
// `calls` must name EVERY operation of the document (its type is built from
// `paths`, so a missing or unknown operation does not compile), each with
// the arguments a real caller passes. The `@ts-expect-error` lines are what
// a schema regression would break: a request the server refuses must not
// type-check, and one it accepts must.
import createClient from "openapi-fetch";
import type { components, paths } from "./revops-api";

type Schemas = components["schemas"];
type Method = "get" | "put" | "post" | "delete" | "patch";
type Operations = {
  [P in keyof paths]: {
    [M in Method as [NonNullable<paths[P][M]>] extends [never] ? never : M]: () => Promise<unknown>;
  };
};

const client = createClient<paths>({ baseUrl: "https://revops.example-hotels.test" });
const pf = "pf_01JD3X5Q7E9ZK4M2N6P8R0T2V4";
const v2 = { "X-Service-Portfolio": pf };
const scim = { Authorization: "Bearer rvo_scim_example" };
const form = (body: unknown) => new URLSearchParams(body as Record<string, string>).toString();

// ---- requests the server accepts type-check -----------------------------

// SCIM: no read-only id in a request; userName required; Entra's "False".
const newUser: Schemas["ScimUserRequest"] = {
  schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"],
  userName: "anna.kowalska@example-hotels.com",
  active: "False",
  emails: [{ value: "anna.kowalska@example-hotels.com", type: "work", primary: "True" }],
  roles: ["revenue-approver", { value: "ops-manager" }],
};
const activeBool: Schemas["ScimUserRequest"] = { userName: "b@example-hotels.com", active: true };
const newGroup: Schemas["ScimGroupRequest"] = {
  displayName: "revenue-approver",
  members: ["usr_01JD40A1B2C3D4E5F6G7H8J9KM", { value: "usr_01JD40A1B2C3D4E5F6G7H8J9KN" }],
};

// ---- requests the server refuses do not -----------------------------------

// @ts-expect-error userName is required in a SCIM user request
const noUserName: Schemas["ScimUserRequest"] = { active: true };
// @ts-expect-error displayName is required in a SCIM group request
const noDisplayName: Schemas["ScimGroupRequest"] = { members: [] };
// @ts-expect-error active is a boolean or a "true"/"false" string, never a number
const numericActive: Schemas["ScimUserRequest"] = { userName: "c@example-hotels.com", active: 1 };
// @ts-expect-error approver_saml_subject is required to revert
const noApprover: Schemas["RateDecisionRevertRequest"] = { reason: "wrong season" };
// @ts-expect-error trigger is required in a rate-suggestion feed item
const noTrigger: Schemas["RateSuggestionFeedItem"] = {
  property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
  room_type_code: "DBL",
  date: "2026-12-05",
  current_rate: { currency: "PLN", minor_units: 45900 },
  proposed_rate: { currency: "PLN", minor_units: 52900 },
};
// @ts-expect-error an approval takes no fields (a reason is for rejecting)
const approveWithReason: Schemas["RateSuggestionApproveRequest"] = { reason: "fine" };
// @ts-expect-error external_id is required in a review feed item
const noExternalId: Schemas["ReviewFeedItem"] = {
  property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
  source: "google",
  rating: 4.5,
  max_rating: 5,
  language: "en",
  text: "",
  author: "",
  published_at: "2026-11-22T09:58:00Z",
};
// @ts-expect-error a reply needs its text
const noReplyText: Schemas["ReviewReplyRequest"] = {};
// @ts-expect-error publishing takes no fields (the text is put with PUT .../reply)
const publishWithText: Schemas["ReviewReplyPublishRequest"] = { text: "Thank you!" };
const asapTask: Schemas["OperationsTaskCreateRequest"] = {
  property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
  title: "Air conditioning broken in room 412",
  category: "maintenance",
  // @ts-expect-error a task's priority is low, normal, high or urgent
  priority: "asap",
};
// @ts-expect-error acknowledging takes no fields (a note is for resolving)
const acknowledgeWithNote: Schemas["OperationsTaskAcknowledgeRequest"] = { resolution: "on it" };
const whatsappFed: Schemas["GuestMessageFeedItem"] = {
  property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
  channel: "email",
  // @ts-expect-error a fed message is inbound or outbound
  direction: "incoming",
  guest: { email: "anna.nowak@example.com" },
  text: "Is breakfast included?",
  at: "2026-11-22T09:58:00Z",
  external_id: "crm-8812",
};
const freeTextReply: Schemas["GuestReplyRequest"] = {
  property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
  template: { name: "late_checkout", language: "en_US" },
  // @ts-expect-error an answer is an approved template, never free text
  text: "See you at 23:00!",
};
const numericParameter: Schemas["GuestReplyRequest"] = {
  property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
  // @ts-expect-error template parameters are strings
  template: { name: "late_checkout", language: "en_US", parameters: [14] },
};

// ---- responses carry what the server always sends -------------------------

function userId(u: Schemas["ScimUser"]): string {
  return u.id; // required in responses
}
function decisionStatus(d: Schemas["RateDecision"]): Schemas["RateDecisionStatus"] {
  return d.status;
}
function suggestionStatus(s: Schemas["RateSuggestion"]): Schemas["RateSuggestionStatus"] {
  return s.status;
}
function feedOutcome(r: Schemas["OtaRateFeedResult"]): string {
  return r.status === "rejected" ? r.error.code : r.status === "created" ? r.parity : r.status;
}
function reviewOutcome(r: Schemas["ReviewFeedResult"]): string {
  return r.status === "rejected" ? r.error.code : r.id + (r.reply_drafted ? " drafted" : "");
}
function replyStatus(r: Schemas["Review"]): Schemas["ReviewReplyStatus"] {
  return r.reply.status;
}
function dropped(a: Schemas["ReputationAlert"]): number {
  return (a.previous_score ?? a.threshold) - a.score;
}
function onCall(t: Schemas["OperationsTask"]): string | null {
  const last = t.escalations[t.escalations.length - 1];
  if (!last?.on_call) return null;
  const who = last.on_call;
  return `${who.name} (${who.source} ${who.from}) ${who.phone ?? who.email ?? ""}`;
}
// A receiver of operations.task.escalated reads its data with the same types.
export function escalatedTo(d: Schemas["OperationsTaskEscalatedData"]): number {
  return d.on_call === null ? -d.level : d.level;
}
function waiting(t: Schemas["GuestThread"]): string {
  const last = t.last_message;
  return `${t.guest.phones[0] ?? t.guest.emails[0] ?? t.guest.id} ${t.status} ` +
    `${t.waiting_seconds}s ${t.escalation_reason ?? ""} ${last?.channel ?? ""}`;
}
function delivery(m: Schemas["GuestMessage"]): string {
  return m.template ? `${m.template.name} ${m.status} ${m.error ?? ""}` : m.text ?? "";
}
// Receivers of the guest-messaging events read their data with the same types.
export function received(d: Schemas["WhatsappReceivedData"]): string {
  return `${d.from} ${d.name ?? "?"}: ${d.text} (${d.wamid})`;
}
export function deliveredTemplate(d: Schemas["WhatsappSentData"]): string | undefined {
  return d.template?.parameters?.join(", ");
}
export function escalatedBecause(d: Schemas["GuestThreadEscalatedData"]): string {
  return d.reason === "keyword" ? `keyword ${d.keyword}` : `${d.waited_seconds}s unanswered`;
}
function tokenOf(t: Schemas["TokenResponse"]): string {
  return t.access_token + t.token_type + t.expires_in.toFixed(0) + t.property_codes.join(" ");
}

// ---- every operation ------------------------------------------------------

const rd = "rd_01JD42A1B2C3D4E5F6G7H8J9KM";
const wh = "wh_01JD43B2C3D4E5F6G7H8J9K0MN";
const dlv = "dlv_01JD41D4E5F6G7H8J9K0M1N2PQ";
const usr = "usr_01JD40A1B2C3D4E5F6G7H8J9KM";
const grp = "grp_01JD40B2C3D4E5F6G7H8J9K0MN";
const rs = "rs_01JD46A1B2C3D4E5F6G7H8J9KM";
const pa = "pa_01JD4CA1B2C3D4E5F6G7H8J9KM";
const rv = "rv_01JD47A1B2C3D4E5F6G7H8J9KM";
const ra = "ra_01JD4BA1B2C3D4E5F6G7H8J9KM";
const ot = "ot_01JD4EA1B2C3D4E5F6G7H8J9KM";
const gt = "gt_01JD48A1B2C3D4E5F6G7H8J9KM";

export const calls: Operations = {
  "/oauth/token": {
    post: async () => {
      const basic = await client.POST("/oauth/token", {
        headers: { Authorization: "Basic " + btoa("cli_01JD3X4P6Q8R0S2T4V6W8X0Y2Z:secret") },
        body: { grant_type: "client_credentials", scope: "rates:read property:WAW01" },
        bodySerializer: form,
      });
      const post = await client.POST("/oauth/token", {
        body: {
          grant_type: "client_credentials",
          client_id: "cli_01JD3X4P6Q8R0S2T4V6W8X0Y2Z",
          client_secret: "secret",
        },
        bodySerializer: form,
      });
      const saml = await client.POST("/oauth/token", {
        body: {
          grant_type: "urn:ietf:params:oauth:grant-type:saml2-bearer",
          assertion: "PHNhbWw6QXNzZXJ0aW9u",
        },
        bodySerializer: form,
      });
      if (basic.data) tokenOf(basic.data);
      if (post.error) return post.error.error;
      return saml.data?.portfolio_id;
    },
  },
  "/.well-known/oauth-authorization-server": {
    get: async () => {
      const m = await client.GET("/.well-known/oauth-authorization-server");
      return m.data ? m.data.token_endpoint + m.data.grant_types_supported.join(" ") : undefined;
    },
  },
  "/healthz": { get: () => client.GET("/healthz") },
  "/readyz": { get: () => client.GET("/readyz") },
  "/metrics": { get: () => client.GET("/metrics", { parseAs: "text" }) },
  "/v2/openapi.json": { get: () => client.GET("/v2/openapi.json") },
  "/v2/portfolios": {
    get: () => client.GET("/v2/portfolios", { params: { header: v2, query: { limit: 10 } } }),
  },
  "/v2/portfolios/{id}": {
    get: () => client.GET("/v2/portfolios/{id}", { params: { header: v2, path: { id: pf } } }),
  },
  "/v2/portfolios/{id}/properties": {
    get: () =>
      client.GET("/v2/portfolios/{id}/properties", {
        params: { header: v2, path: { id: pf }, query: { limit: 50 } },
      }),
  },
  "/v2/rate-decisions": {
    get: () =>
      client.GET("/v2/rate-decisions", { params: { header: v2, query: { status: "published" } } }),
    post: async () => {
      const r = await client.POST("/v2/rate-decisions", {
        params: { header: { ...v2, "Idempotency-Key": "rd-2026-11-22-dbl" } },
        body: {
          properties: ["prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y"],
          room_type_code: "DBL",
          date_range: { from: "2026-12-01", to: "2026-12-03" },
          proposed_rate: { currency: "PLN", minor_units: 45900 },
          governance: {
            brand_ceiling_id: "bc_01JD3X7S9G1B6P4Q8R0T2V4X6Z",
            approver_saml_subject: "approver@example-hotels.com",
            justification: "City event weekend",
          },
        },
      });
      return r.data?.data;
    },
  },
  "/v2/rate-decisions/{id}": {
    get: async () => {
      const r = await client.GET("/v2/rate-decisions/{id}", {
        params: { header: v2, path: { id: rd } },
      });
      return r.data && decisionStatus(r.data.data);
    },
  },
  "/v2/rate-decisions/{id}/audit-trail": {
    get: () =>
      client.GET("/v2/rate-decisions/{id}/audit-trail", { params: { header: v2, path: { id: rd } } }),
  },
  "/v2/rate-decisions/{id}/revert": {
    post: () =>
      client.POST("/v2/rate-decisions/{id}/revert", {
        params: { header: v2, path: { id: rd } },
        body: { reason: "Wrong season", approver_saml_subject: "approver@example-hotels.com" },
      }),
  },
  "/v2/feeds/rate-suggestions": {
    post: async () => {
      const r = await client.POST("/v2/feeds/rate-suggestions", {
        params: { header: { ...v2, "Idempotency-Key": "rms-2026-11-22-0745" } },
        body: {
          items: [
            {
              property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
              room_type_code: "DBL",
              date: "2026-12-05",
              current_rate: { currency: "PLN", minor_units: 45900 },
              proposed_rate: { currency: "PLN", minor_units: 52900 },
              trigger: "competitor_rate_change",
            },
          ],
        },
      });
      return r.data?.data.results.map((x) => (x.status === "rejected" ? x.error.code : x.status));
    },
  },
  "/v2/feeds/ota-rates": {
    post: async () => {
      const r = await client.POST("/v2/feeds/ota-rates", {
        params: { header: v2 },
        body: {
          items: [
            {
              property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
              ota: "booking.com",
              room_type_code: "DBL",
              date: "2026-12-05",
              rate: { currency: "PLN", minor_units: 41900 },
              observed_at: "2026-11-22T15:04:58Z",
            },
          ],
        },
      });
      return r.data?.data.results.map(feedOutcome);
    },
  },
  "/v2/rate-suggestions": {
    get: () =>
      client.GET("/v2/rate-suggestions", {
        params: {
          header: v2,
          query: { status: "pending_approval", date_from: "2026-12-01", date_to: "2026-12-31" },
        },
      }),
  },
  "/v2/rate-suggestions/{id}": {
    get: async () => {
      const r = await client.GET("/v2/rate-suggestions/{id}", {
        params: { header: v2, path: { id: rs } },
      });
      return r.data && suggestionStatus(r.data.data);
    },
  },
  "/v2/rate-suggestions/{id}/audit-trail": {
    get: () =>
      client.GET("/v2/rate-suggestions/{id}/audit-trail", {
        params: { header: v2, path: { id: rs } },
      }),
  },
  "/v2/rate-suggestions/{id}/approve": {
    post: async () => {
      const r = await client.POST("/v2/rate-suggestions/{id}/approve", {
        params: { header: v2, path: { id: rs } },
      });
      return r.data?.data.booking_engine?.ref;
    },
  },
  "/v2/rate-suggestions/{id}/reject": {
    post: () =>
      client.POST("/v2/rate-suggestions/{id}/reject", {
        params: { header: v2, path: { id: rs } },
        body: { reason: "Above the weekend corporate agreement rate" },
      }),
  },
  "/v2/parity-alerts": {
    get: () =>
      client.GET("/v2/parity-alerts", {
        params: { header: v2, query: { status: "open", ota: "booking.com" } },
      }),
  },
  "/v2/parity-alerts/{id}": {
    get: async () => {
      const r = await client.GET("/v2/parity-alerts/{id}", {
        params: { header: v2, path: { id: pa } },
      });
      return r.data?.data.gap.percent;
    },
  },
  "/v2/feeds/reviews": {
    post: async () => {
      const r = await client.POST("/v2/feeds/reviews", {
        params: { header: { ...v2, "Idempotency-Key": "reviews-2026-11-22-1015" } },
        body: {
          items: [
            {
              property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
              source: "google",
              external_id: "ChdDSUhNMG9nS0VJQ0FnSUR3dGZIV2V3EAE",
              rating: 3,
              max_rating: 5,
              language: "en",
              text: "Great location, but breakfast was crowded on Sunday.",
              author: "Anna K.",
              published_at: "2026-11-22T09:58:00Z",
            },
          ],
        },
      });
      return r.data?.data.results.map(reviewOutcome);
    },
  },
  "/v2/reviews": {
    get: () =>
      client.GET("/v2/reviews", {
        params: {
          header: v2,
          query: { source: "google", language: "pl-PL", reply_status: "drafted", limit: 100 },
        },
      }),
  },
  "/v2/reviews/{id}": {
    get: async () => {
      const r = await client.GET("/v2/reviews/{id}", { params: { header: v2, path: { id: rv } } });
      return r.data && replyStatus(r.data.data);
    },
  },
  "/v2/reviews/{id}/reply": {
    put: async () => {
      const r = await client.PUT("/v2/reviews/{id}/reply", {
        params: { header: v2, path: { id: rv } },
        body: { text: "Thank you, Anna - see you soon!" },
      });
      return r.data?.data.reply.edited;
    },
  },
  "/v2/reviews/{id}/reply/publish": {
    post: async () => {
      const r = await client.POST("/v2/reviews/{id}/reply/publish", {
        params: { header: v2, path: { id: rv } },
      });
      return r.data?.data.reply.next_attempt_at;
    },
  },
  "/v2/reputation-alerts": {
    get: () =>
      client.GET("/v2/reputation-alerts", {
        params: { header: v2, query: { status: "open", brand: "Vistula Suites" } },
      }),
  },
  "/v2/reputation-alerts/{id}": {
    get: async () => {
      const r = await client.GET("/v2/reputation-alerts/{id}", {
        params: { header: v2, path: { id: ra } },
      });
      return r.data && dropped(r.data.data);
    },
  },
  "/v2/reputation": {
    get: async () => {
      const r = await client.GET("/v2/reputation", { params: { header: v2 } });
      return r.data?.data.brands.map((b) => (b.score ?? 0) < (b.min_score ?? 0));
    },
  },
  "/v2/operations-tasks": {
    get: () =>
      client.GET("/v2/operations-tasks", {
        params: { header: v2, query: { status: "open", sla_tier: "platinum", escalated: true } },
      }),
    post: async () => {
      const r = await client.POST("/v2/operations-tasks", {
        params: { header: { ...v2, "Idempotency-Key": "pms-task-412-ac" } },
        body: {
          property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
          title: "Air conditioning broken in room 412",
          category: "maintenance",
          priority: "high",
          sla_tier: null,
          due_at: "2026-11-22T20:00:00Z",
        },
      });
      return r.data?.data.acknowledge_by;
    },
  },
  "/v2/operations-tasks/{id}": {
    get: async () => {
      const r = await client.GET("/v2/operations-tasks/{id}", {
        params: { header: v2, path: { id: ot } },
      });
      return r.data && onCall(r.data.data);
    },
  },
  "/v2/operations-tasks/{id}/acknowledge": {
    post: async () => {
      const r = await client.POST("/v2/operations-tasks/{id}/acknowledge", {
        params: { header: v2, path: { id: ot } },
      });
      return r.data?.data.acknowledged_by;
    },
  },
  "/v2/operations-tasks/{id}/resolve": {
    post: () =>
      client.POST("/v2/operations-tasks/{id}/resolve", {
        params: { header: v2, path: { id: ot } },
        body: { resolution: "Compressor replaced" },
      }),
  },
  "/v2/feeds/guest-messages": {
    post: async () => {
      const r = await client.POST("/v2/feeds/guest-messages", {
        params: { header: { ...v2, "Idempotency-Key": "crm-2026-11-22-1012" } },
        body: {
          items: [
            {
              property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
              channel: "email",
              direction: "inbound",
              guest: { phone: "+48 600-100-200", email: "anna.nowak@example.com", name: "Anna" },
              text: "Is breakfast included?",
              at: "2026-11-22T09:58:00Z",
              external_id: "crm-8812",
            },
            {
              property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
              channel: "booking.com",
              direction: "outbound",
              guest: { phone: null, email: "anna.nowak@example.com" },
              text: "Yes, it is.",
              at: "2026-11-22T10:01:00+01:00",
              external_id: "bk-55120931",
            },
          ],
        },
      });
      return r.data?.data.results.map((x) =>
        x.status === "rejected" ? x.error.code : `${x.thread_id} ${x.escalated}`,
      );
    },
  },
  "/v2/guest-threads": {
    get: async () => {
      const r = await client.GET("/v2/guest-threads", {
        params: {
          header: v2,
          query: { status: "escalated", guest: "+48600100200", escalated: true, limit: 20 },
        },
      });
      return r.data?.data.map(waiting);
    },
  },
  "/v2/guest-threads/{id}": {
    get: async () => {
      const r = await client.GET("/v2/guest-threads/{id}", {
        params: { header: v2, path: { id: gt } },
      });
      return r.data && [r.data.data.messages.map(delivery), r.data.data.messages_next];
    },
  },
  "/v2/guest-threads/{id}/messages": {
    get: () =>
      client.GET("/v2/guest-threads/{id}/messages", {
        params: {
          header: v2,
          path: { id: gt },
          query: { after: "msg_01JD48C3D4E5F6G7H8J9K0M1NP", limit: 100 },
        },
      }),
    post: async () => {
      const r = await client.POST("/v2/guest-threads/{id}/messages", {
        params: {
          header: { ...v2, "Idempotency-Key": "reply-late-checkout-1" },
          path: { id: gt },
        },
        body: {
          property_id: "prop_01JD3X6R8F0A5N3P7Q9S1U3W5Y",
          template: { name: "late_checkout", language: "en_US", parameters: ["14:00"] },
        },
      });
      return r.data && delivery(r.data.data);
    },
  },
  // Meta calls these two (no bearer token: the verify token, the signature of the raw body).
  "/channels/whatsapp/webhook": {
    get: () =>
      client.GET("/channels/whatsapp/webhook", {
        params: {
          query: {
            "hub.mode": "subscribe",
            "hub.verify_token": "k3Y8-verify-7pQ2",
            "hub.challenge": "1158201444",
          },
        },
        parseAs: "text",
      }),
    post: () =>
      client.POST("/channels/whatsapp/webhook", {
        params: { header: { "X-Hub-Signature-256": "sha256=" + "0".repeat(64) } },
        body: {
          object: "whatsapp_business_account",
          entry: [
            {
              id: "102290129340398",
              changes: [
                {
                  field: "messages",
                  value: {
                    metadata: { phone_number_id: "106540352242922" },
                    statuses: [{ id: "wamid.HBgLNDg2MDAxMDAyMDA", status: "delivered" }],
                  },
                },
              ],
            },
          ],
        },
      }),
  },
  "/v1/webhooks": {
    post: () =>
      client.POST("/v1/webhooks", {
        body: { url: "https://hooks.example-hotels.com/revops", events: ["rate.suggested"] },
      }),
  },
  "/v1/webhooks/{id}/ping": {
    post: () => client.POST("/v1/webhooks/{id}/ping", { params: { path: { id: wh } } }),
  },
  "/v1/webhooks/deliveries/{id}/retry": {
    post: () => client.POST("/v1/webhooks/deliveries/{id}/retry", { params: { path: { id: dlv } } }),
  },
  "/v2/webhooks": {
    get: () => client.GET("/v2/webhooks", { params: { header: v2 } }),
    post: async () => {
      const r = await client.POST("/v2/webhooks", {
        params: { header: v2 },
        body: {
          url: "https://hooks.example-hotels.com/revops",
          mirror_url: null,
          events: ["rate.decision.published"],
          description: null,
        },
      });
      return r.data?.data.signing_secret;
    },
  },
  "/v2/webhooks/{id}": {
    get: () => client.GET("/v2/webhooks/{id}", { params: { header: v2, path: { id: wh } } }),
    delete: () => client.DELETE("/v2/webhooks/{id}", { params: { header: v2, path: { id: wh } } }),
  },
  "/v2/webhooks/{id}/ping": {
    post: () => client.POST("/v2/webhooks/{id}/ping", { params: { header: v2, path: { id: wh } } }),
  },
  "/v2/webhooks/{id}/deliveries": {
    get: () =>
      client.GET("/v2/webhooks/{id}/deliveries", { params: { header: v2, path: { id: wh } } }),
  },
  "/v2/webhooks/deliveries/{id}": {
    get: () =>
      client.GET("/v2/webhooks/deliveries/{id}", { params: { header: v2, path: { id: dlv } } }),
  },
  "/v2/webhooks/deliveries/{id}/replay": {
    post: () =>
      client.POST("/v2/webhooks/deliveries/{id}/replay", {
        params: { header: v2, path: { id: dlv } },
      }),
  },
  "/v2/webhooks/dead-letters": {
    get: () =>
      client.GET("/v2/webhooks/dead-letters", {
        params: { header: v2, query: { subscription_id: wh } },
      }),
  },
  "/v2/webhooks/sla": {
    get: () =>
      client.GET("/v2/webhooks/sla", { params: { header: v2, query: { month: "2026-11" } } }),
  },
  "/v2/webhooks/signing-secret/rotate": {
    post: () => client.POST("/v2/webhooks/signing-secret/rotate", { params: { header: v2 } }),
  },
  "/scim/v2/ServiceProviderConfig": {
    get: () => client.GET("/scim/v2/ServiceProviderConfig", { headers: scim }),
  },
  "/scim/v2/ResourceTypes": { get: () => client.GET("/scim/v2/ResourceTypes", { headers: scim }) },
  "/scim/v2/ResourceTypes/{id}": {
    get: () =>
      client.GET("/scim/v2/ResourceTypes/{id}", { headers: scim, params: { path: { id: "User" } } }),
  },
  "/scim/v2/Schemas": { get: () => client.GET("/scim/v2/Schemas", { headers: scim }) },
  "/scim/v2/Schemas/{id}": {
    get: () =>
      client.GET("/scim/v2/Schemas/{id}", {
        headers: scim,
        params: { path: { id: "urn:ietf:params:scim:schemas:core:2.0:User" } },
      }),
  },
  "/scim/v2/Users": {
    get: () =>
      client.GET("/scim/v2/Users", {
        headers: scim,
        params: { query: { filter: 'userName eq "anna"', startIndex: 1, count: 10 } },
      }),
    post: async () => {
      const r = await client.POST("/scim/v2/Users", { headers: scim, body: newUser });
      await client.POST("/scim/v2/Users", { headers: scim, body: activeBool });
      return r.data && userId(r.data);
    },
  },
  "/scim/v2/Users/{id}": {
    get: async () => {
      const r = await client.GET("/scim/v2/Users/{id}", {
        headers: scim,
        params: { path: { id: usr } },
      });
      return r.data?.groups?.map((g) => g.value);
    },
    put: () =>
      client.PUT("/scim/v2/Users/{id}", {
        headers: scim,
        params: { path: { id: usr }, header: { "If-Match": 'W/"3"' } },
        body: { ...newUser, active: true },
      }),
    patch: () =>
      client.PATCH("/scim/v2/Users/{id}", {
        headers: scim,
        params: { path: { id: usr } },
        body: {
          schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
          Operations: [{ op: "Replace", value: { active: "False" } }],
        },
      }),
    delete: () =>
      client.DELETE("/scim/v2/Users/{id}", { headers: scim, params: { path: { id: usr } } }),
  },
  "/scim/v2/Groups": {
    get: () => client.GET("/scim/v2/Groups", { headers: scim }),
    post: () => client.POST("/scim/v2/Groups", { headers: scim, body: newGroup }),
  },
  "/scim/v2/Groups/{id}": {
    get: () =>
      client.GET("/scim/v2/Groups/{id}", { headers: scim, params: { path: { id: grp } } }),
    put: () =>
      client.PUT("/scim/v2/Groups/{id}", {
        headers: scim,
        params: { path: { id: grp } },
        body: { displayName: "ops-manager", members: [] },
      }),
    patch: () =>
      client.PATCH("/scim/v2/Groups/{id}", {
        headers: scim,
        params: { path: { id: grp } },
        body: {
          Operations: [{ op: "add", path: "members", value: [{ value: usr }] }],
        },
      }),
    delete: () =>
      client.DELETE("/scim/v2/Groups/{id}", { headers: scim, params: { path: { id: grp } } }),
  },
};

export const refused = [
  noUserName,
  noDisplayName,
  numericActive,
  noApprover,
  noTrigger,
  approveWithReason,
  noExternalId,
  noReplyText,
  publishWithText,
  asapTask,
  acknowledgeWithNote,
  whatsappFed,
  freeTextReply,
  numericParameter,
];
