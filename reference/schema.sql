-- The ReachWeaver database layout (schema version 3).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE campaigns (
    id        TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    file      TEXT,
    status    TEXT NOT NULL,
    starts_on TEXT,
    ends_on   TEXT
);
CREATE TABLE drafts (
    id          TEXT PRIMARY KEY,
    campaign_id TEXT REFERENCES campaigns(id),
    channel     TEXT NOT NULL,
    title       TEXT,
    body        TEXT NOT NULL,
    status      TEXT NOT NULL,
    reply_to    TEXT,
    flagged     INTEGER NOT NULL DEFAULT 0,
    created_on  TEXT NOT NULL
);
CREATE TABLE events (
    id          INTEGER PRIMARY KEY,
    draft_id    TEXT NOT NULL REFERENCES drafts(id),
    happened_at TEXT NOT NULL,
    kind        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    detail      TEXT
);
CREATE TABLE approvals (
    draft_id     TEXT PRIMARY KEY REFERENCES drafts(id),
    requested_on TEXT NOT NULL,
    decided_on   TEXT,
    decision     TEXT,
    approver     TEXT,
    note         TEXT
);
CREATE TABLE schedule (
    draft_id TEXT PRIMARY KEY REFERENCES drafts(id),
    channel  TEXT NOT NULL,
    slot     TEXT NOT NULL,
    state    TEXT NOT NULL
);
CREATE TABLE posts (
    id           TEXT PRIMARY KEY,
    draft_id     TEXT REFERENCES drafts(id),
    channel      TEXT NOT NULL,
    published_on TEXT NOT NULL,
    url          TEXT,
    body         TEXT NOT NULL
);
CREATE TABLE metrics (
    post_id      TEXT NOT NULL REFERENCES posts(id),
    day          TEXT NOT NULL,
    impressions  INTEGER NOT NULL,
    engagements  INTEGER NOT NULL,
    clicks       INTEGER NOT NULL,
    replies      INTEGER NOT NULL,
    PRIMARY KEY (post_id, day)
);
CREATE TABLE engagers (
    post_id      TEXT NOT NULL REFERENCES posts(id),
    handle       TEXT NOT NULL,
    display_name TEXT NOT NULL,
    interactions INTEGER NOT NULL,
    PRIMARY KEY (post_id, handle)
);
CREATE TABLE contacts (
    id      INTEGER PRIMARY KEY,
    name    TEXT NOT NULL,
    email   TEXT NOT NULL,
    segment TEXT NOT NULL,
    handle  TEXT
);
INSERT INTO meta (key, value) VALUES ('schema_version', '3');
