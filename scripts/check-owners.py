#!/usr/bin/env python3
"""Checks that each table has one owner (docs/architecture.md, "Where each
table lives"): SQL naming a table (FROM, JOIN, INTO, UPDATE, DELETE FROM,
TABLE) appears only in its owning file under src/. Other modules call the
owner's functions. The few reads that join another module's table on a hot
path, where a second query per request would cost more than the coupling,
are listed in JOINED with their reason. Run by ctest (test `owners`);
exits 1 with one line per violation."""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

OWNERS = {
    "portfolios": "portfolio/portfolio.c",
    "properties": "portfolio/portfolio.c",
    "brand_ceilings": "portfolio/portfolio.c",
    "users": "identity/directory.c",
    "scim_groups": "identity/directory.c",
    "oauth_clients": "identity/auth.c",
    "access_tokens": "identity/auth.c",
    "scim_tokens": "identity/auth.c",
    "identity_providers": "identity/idp.c",
    "saml_assertions_used": "identity/idp.c",
    "events": "events/outbox.c",
    "idempotency_keys": "api/idempotency.c",
    "deprecations": "api/deprecation.c",
    "server_keys": "api/pipeline.c",
    "key_checks": "cluster/sealkey.c",
    "store_probe": "store/store.c",
    "rate_decisions": "rates/decision.c",
    "audit_entries": "rates/audit_trail.c",
    "suggestion_audit_entries": "rates/audit_trail.c",
    "rate_suggestions": "rates/suggestion.c",
    "rate_floors": "rates/floors.c",
    "ota_observations": "feeds/ota.c",
    "parity_alerts": "feeds/ota.c",
    "reviews": "feeds/reviews.c",
    "review_templates": "feeds/reviews.c",
    "reputation_days": "feeds/reputation.c",
    "reputation_floors": "feeds/reputation.c",
    "reputation_scores": "feeds/reputation.c",
    "reputation_alerts": "feeds/reputation.c",
    "webhook_subscriptions": "webhooks/subscriptions.c",
    "webhook_portfolio_secrets": "webhooks/subscriptions.c",
    "webhook_deliveries": "webhooks/engine.c",
    "webhook_attempts": "webhooks/engine.c",
    "webhook_dispatch": "webhooks/engine.c",
    "webhook_claims": "webhooks/engine.c",
    "nodes": "cluster/cluster.c",
    "work_leases": "cluster/cluster.c",
    "ratelimit_grants": "api/ratelimit_shared.c",
    "timers": "sched/timers.c",
    "sla_tier_settings": "operations/sla.c",
    "oncall_rotas": "operations/oncall.c",
    "operations_tasks": "operations/tasks.c",
    "guests": "guests/threads.c",
    "guest_identities": "guests/threads.c",
    "guest_threads": "guests/threads.c",
    "guest_thread_properties": "guests/threads.c",
    "guest_messages": "guests/threads.c",
    "guest_keywords": "guests/keywords.c",
    "whatsapp_channels": "guests/whatsapp.c",
}

# (file, table): why this file reads another module's table in a join.
JOINED = {
    ("identity/auth.c", "portfolios"):
        "the bearer-token lookup, once per request, takes the plan and rate limit in the same query",
    ("identity/auth.c", "users"):
        "the bearer-token lookup, once per request, takes whether the user is active in the same query",
    ("webhooks/subscriptions.c", "portfolios"):
        "fan-out reads each enabled subscription with its portfolio's plan (delivery schedule) in one scan",
    ("rates/decision.c", "nodes"):
        "recovery takes over the pending decisions of dead nodes: one statement, not a list of ids",
    ("webhooks/engine.c", "nodes"):
        "recovery takes over the webhook claims of dead nodes: one statement, not a list of ids",
}

SQL = re.compile(r'\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([a-z_][a-z0-9_]*)\b')


def main():
    problems = []
    for dirpath, _, names in os.walk(ROOT):
        for name in sorted(names):
            if not name.endswith(".c"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                text = f.read()
            for table in sorted(set(SQL.findall(text))):
                owner = OWNERS.get(table)
                if owner is None or owner == rel or (rel, table) in JOINED:
                    continue
                problems.append("%s: names table %s, owned by %s" % (rel, table, owner))
    migrations = os.path.join(ROOT, "store", "migrations")
    for dirpath, _, names in os.walk(migrations):
        for name in names:
            with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                for table in re.findall(r'CREATE TABLE\s+([a-z_][a-z0-9_]*)', f.read()):
                    if table not in OWNERS and not table.endswith("_new"):
                        problems.append("%s: table %s has no owner in scripts/check-owners.py"
                                        % (name, table))
    for p in problems:
        print(p)
    if problems:
        print("%d ownership violation(s); see docs/architecture.md" % len(problems))
        return 1
    print("owners: every table is named only by its owner")
    return 0


if __name__ == "__main__":
    sys.exit(main())
