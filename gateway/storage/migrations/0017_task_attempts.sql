-- The failed attempts of a media task's submission (issue 35: the console's detail of a request-log
-- row), kept with the task until its charge or refund writes its log row (gateway.tasks.submit_attempts);
-- NULL when its first upstream accepted it.

ALTER TABLE tasks ADD COLUMN attempt_log TEXT;
