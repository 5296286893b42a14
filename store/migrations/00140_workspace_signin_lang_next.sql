-- The workspace's sign-in links may sign the admin in (loopx dashboard on the serving
-- machine), and remember the language of the chat that sent them and the page
-- to land on (a gate card's "Open in workspace" lands on that gate), and the person's last
-- language choice in chat is found by who set it (issue 24).

-- +goose Up
ALTER TABLE web_signin
    ADD COLUMN lang text NOT NULL DEFAULT '' CHECK (lang IN ('', 'en', 'zh')),
    ADD COLUMN next text NOT NULL DEFAULT '' CHECK (length(next) <= 300),
    ADD COLUMN admin boolean NOT NULL DEFAULT false; -- signs the admin in (loopx dashboard), open_id ''

CREATE INDEX chat_setting_by ON chat_setting (updated_by, updated_at DESC);

-- +goose Down
DROP INDEX chat_setting_by;
ALTER TABLE web_signin DROP COLUMN lang, DROP COLUMN next, DROP COLUMN admin;
