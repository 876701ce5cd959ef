-- The failed attempts of a call (issue 35: the console's detail of a request-log row): a JSON list of
-- {upstream, status, error, ms}, one per attempt that failed before the answer or the error; NULL
-- when the first attempt served the call (nearly always), so the common row grows by nothing.

ALTER TABLE request_logs ADD COLUMN attempt_log TEXT;
