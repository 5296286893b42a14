-- The web workspace (issue 14): one-time sign-in links the bot sends and server-side
-- sessions. Only hashes of the link tokens and session ids are stored.

-- +goose Up
CREATE TABLE web_signin (
    token_hash bytea PRIMARY KEY,                  -- sha256 of the link's token
    open_id    text NOT NULL,                      -- the Lark person the link signs in
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,                        -- single use
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_signin_age ON web_signin (created_at);

CREATE TABLE web_session (
    id_hash    bytea PRIMARY KEY,                  -- sha256 of the cookie's session id
    open_id    text NOT NULL DEFAULT '',           -- '' for an admin-token session
    admin      boolean NOT NULL DEFAULT false,     -- signed in with the admin token
    csrf       text NOT NULL,                      -- the token every form of the session carries
    lang       text NOT NULL DEFAULT '' CHECK (lang IN ('', 'en', 'zh')), -- the person's choice
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX web_session_age ON web_session (expires_at);

-- +goose Down
DROP TABLE web_session, web_signin;
