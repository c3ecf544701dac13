-- Written to be applied again over itself, as 010 is.
--
-- Guest messaging (issue 16): portfolio-level guests known by their
-- phone numbers (E.164) and e-mail addresses, one thread per guest across
-- the portfolio's properties, its messages from every channel, the
-- WhatsApp channel of each property (secrets sealed or hashed), and the
-- escalation keywords of a portfolio.

CREATE TABLE IF NOT EXISTS guests (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  name TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

-- kind phone (E.164) or email (lower case); a guest has any number of each.
CREATE TABLE IF NOT EXISTS guest_identities (
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  kind TEXT NOT NULL CHECK (kind IN ('phone', 'email')),
  value TEXT NOT NULL,
  guest_id TEXT NOT NULL REFERENCES guests (id),
  PRIMARY KEY (portfolio_id, kind, value)
);
CREATE INDEX IF NOT EXISTS guest_identities_by_guest ON guest_identities (guest_id);

-- One thread per guest. waiting_since: the oldest inbound message not yet
-- answered (NULL when none); episode counts the waits, escalated_episode
-- the last one escalated.
CREATE TABLE IF NOT EXISTS guest_threads (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  guest_id TEXT NOT NULL REFERENCES guests (id),
  status TEXT NOT NULL CHECK (status IN ('open', 'escalated')),
  waiting_since INTEGER,
  episode INTEGER NOT NULL DEFAULT 0,
  escalated_episode INTEGER NOT NULL DEFAULT 0,
  escalated_at INTEGER,
  escalation_reason TEXT,
  last_message_id TEXT,
  last_message_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (portfolio_id, guest_id)
);
CREATE INDEX IF NOT EXISTS guest_threads_by_portfolio ON guest_threads (portfolio_id, id);

CREATE TABLE IF NOT EXISTS guest_thread_properties (
  thread_id TEXT NOT NULL REFERENCES guest_threads (id),
  property_id TEXT NOT NULL REFERENCES properties (id),
  PRIMARY KEY (thread_id, property_id)
);
CREATE INDEX IF NOT EXISTS guest_thread_properties_by_property
  ON guest_thread_properties (property_id, thread_id);

-- external_id: WhatsApp's message id (wamid...) or the feed's id; a
-- message seen twice is one message.
CREATE TABLE IF NOT EXISTS guest_messages (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  thread_id TEXT NOT NULL REFERENCES guest_threads (id),
  property_id TEXT NOT NULL REFERENCES properties (id),
  channel TEXT NOT NULL,
  direction TEXT NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  external_id TEXT,
  recipient TEXT,
  text TEXT,
  template TEXT,
  status TEXT NOT NULL
    CHECK (status IN ('received', 'queued', 'sent', 'delivered', 'read', 'failed')),
  error TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER,
  at INTEGER NOT NULL,
  created_by TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (portfolio_id, channel, external_id)
);
CREATE INDEX IF NOT EXISTS guest_messages_by_thread ON guest_messages (thread_id, id);
CREATE INDEX IF NOT EXISTS guest_messages_queued ON guest_messages (next_attempt_at)
  WHERE status = 'queued';

CREATE TABLE IF NOT EXISTS whatsapp_channels (
  property_id TEXT PRIMARY KEY REFERENCES properties (id),
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  phone_number_id TEXT NOT NULL UNIQUE,
  access_token_sealed TEXT NOT NULL,
  app_secret_sealed TEXT NOT NULL,
  verify_token_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

-- Words that escalate an inbound message at once, per portfolio and
-- language ("*" for every language), folded (lower case, no accents).
CREATE TABLE IF NOT EXISTS guest_keywords (
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  language TEXT NOT NULL,
  words TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (portfolio_id, language)
);
