-- The message of a refused or failed call as its client read it (issue 35: the console's detail of a
-- request-log row), secrets scrubbed and capped at ERROR_MESSAGE_CHARS; NULL when the call succeeded.

ALTER TABLE request_logs ADD COLUMN error_message TEXT;
