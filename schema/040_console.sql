-- 040_console.sql: who is signed in to the web console, what they did, and
-- approvers scoped to destination channels.
--
-- The console (`runledger console`, docs/console.md) authenticates people,
-- not database users. A console user has a role (viewer reads; approver
-- also decides the proposals of the tenants it is an approver of;
-- operator also acts on runs and dead letters) and a sign-in token of
-- which the ledger keeps only the SHA-256: `runledger users add` prints
-- the token once, and nobody can read it back. A sign-in opens a session
-- whose cookie value is likewise stored only as its SHA-256, with an
-- expiry; revoking a user ends its sessions.

CREATE TABLE console_users (
    name         text        PRIMARY KEY
                 CONSTRAINT console_users_name_valid
                 CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
    role         text        NOT NULL
                 CONSTRAINT console_users_role_known
                 CHECK (role IN ('viewer', 'approver', 'operator')),
    token_sha256 text        NOT NULL
                 CONSTRAINT console_users_token_is_sha256_hex
                 CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

CREATE TABLE console_sessions (
    session_sha256 text        PRIMARY KEY
                   CONSTRAINT console_sessions_id_is_sha256_hex
                   CHECK (session_sha256 ~ '^[0-9a-f]{64}$'),
    user_name      text        NOT NULL
                   REFERENCES console_users (name) ON DELETE CASCADE,
    address        text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL
);

-- Expired sessions are deleted by expiry; a user's by name on revoke.
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);
CREATE INDEX console_sessions_user_idx ON console_sessions (user_name);

-- Every decision and operator action: who, what, when, from which
-- address, and the digest a decision covered. Append-only: the trigger
-- audit_append_only refuses UPDATE, DELETE and TRUNCATE. No foreign key to
-- runs: the trail outlives a purged run.
CREATE TABLE audit (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL,
    action  text        NOT NULL,
    run_id  text,
    address text,
    digest  text,
    via     text        NOT NULL
            CONSTRAINT audit_via_known CHECK (via IN ('cli', 'console')),
    detail  text
);

CREATE INDEX audit_run_idx ON audit (run_id, id) WHERE run_id IS NOT NULL;

-- An approver may be scoped to one destination channel of the tenant: a
-- row with a channel lets the actor decide runs whose every destination
-- is a channel it holds a row for; a row without one, every run of the
-- tenant. The key therefore includes the channel.
ALTER TABLE approvers ADD COLUMN channel text
    CONSTRAINT approvers_channel_named CHECK (channel <> '');
ALTER TABLE approvers DROP CONSTRAINT approvers_pkey;
CREATE UNIQUE INDEX approvers_scope_key
    ON approvers (tenant, actor, coalesce(channel, ''));
