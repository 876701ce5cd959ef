"""The media-task engine, shared by every asynchronous family (image, video, music, ...).

The flow every such family follows: submit, receive a task id, poll (or receive a callback), read
the result. The engine owns everything of that flow that is not a wire format:

* ``engine.TaskEngine``: submit (SSRF check of the callback URL, durable money hold, upstream
  call with failover), reads with ownership (another user's task is 404) and refresh-on-fetch,
  and every status change as a compare-and-swap that charges or refunds exactly once;
* ``poller.Poller``: follows unfinished tasks at ``tasks.poll_first_s`` / ``tasks.poll_interval_s``,
  in batches, under per-replica leases, failing and refunding after ``tasks.timeout_s`` or when the
  upstream forgot a task;
* ``callbacks.CallbackOutbox``, ``callbacks.CallbackSender`` and ``ssrf.CallbackGuard``: callbacks
  queued with their status change, sent with retries and backoff, refused for non-public
  destinations unless ``tasks.callback_allowlist`` admits them;
* ``upstream.TaskHttp``: task calls to an upstream on the pooled client;
* ``media.MediaLinks``, ``download.relay`` and ``routes``: result files at the gateway's own signed
  links (``GET /v1/media/<task>/<slot>``), fetched from the upstream (off its origin only through
  the SSRF guard) and streamed to the client in constant memory, within size and time limits.

How a family plugs in (see ``family.py`` for the types):

1. Return a ``TaskFamily`` from the ``gateway_task_families`` hook: its ``name``, upstream
   ``protocol``, ``failure_status``, ``poll_batch`` and two methods, ``poll`` (ask the upstream
   about some tasks: a ``Snapshot`` per upstream id it still knows, whose ``phase`` says what the
   family's status means: queued, running, succeeded, failed) and ``callback_payload``.
2. Return an upstream adapter with ``capabilities=frozenset({"task"})`` for that protocol from
   ``gateway_upstream_adapters`` (it supplies the upstream credential headers).
3. In its routes (``gateway_routes``): authenticate, validate, then::

       engine = engine_of(get_gateway(request))
       candidates = [Candidate(target, model, price_nano) for ...]   # e.g. engine.upstream_targets()
       task = await engine.submit(principal, request_id(request), NewTask(...), candidates, send)

   where ``send(candidate)`` calls the upstream (``engine.http.call``) and returns ``Submitted``
   (raising ``UpstreamFailure`` to fail over, a ``GatewayError`` to refuse). Reads use
   ``engine.fetch`` / ``engine.fetch_many`` / ``engine.get_owned`` and render the ``TaskRecord``
   (``status``, ``progress``, ``result_json`` as the family's snapshot left them; times; billing),
   shown through ``engine.shown(request, task)`` so that result links are the gateway's.
4. Optionally give the family a ``media(task)`` method (``media.MediaFamily``): its result files
   by slot, each the upstream's link as stored in ``result_json`` (or a path of the upstream's
   API). The engine swaps those links for its own in what routes and callbacks show, and serves
   them (``download.relay`` serves one from a family's own route, e.g. a ``/content`` download).

Notes for families beyond images:

* Price: each ``Candidate`` carries its own ``price_nano`` (per task, or unit price x seconds via
  ``gateway.accounts.money.unit_cost``); the engine holds the dearest candidate's and, on success, charges
  the chosen one's, or ``Snapshot.charge_nano`` when the family knows the actual cost (seconds
  actually generated), never above the hold. A failure charges nothing.
* ``TaskRecord.billing_status`` is ``reserved`` / ``charged`` / ``refunded`` (spec 2.3's values);
  ``charged_nano`` the actual charge; ``created_at``/``started_at``/``finished_at`` Unix seconds.
* ``NewTask.hook_param`` names the callback field in a 400 (``notify_hook`` for music).
* ``TaskHttp.call`` sends any method (GET for a status endpoint); ``TaskHttp.open`` streams a
  result file (redirects followed) for a download route to relay chunk by chunk.
* ``engine.fetch_many`` answers only the caller's tasks of the family, in the order asked.

The engine is started and stopped by the ``plugins.tasks`` plugin (``gateway_startup`` /
``gateway_shutdown``). Money: the hold is made with ``Meter.reserve(durable=True)`` and closed by
``Storage.transition_task`` in the same transaction as the task's final CAS, so a restart between
submit and completion still charges or refunds the task once, and ``gateway audit`` stays clean.
"""

from gateway.tasks.engine import NewTask, TaskEngine, engine_of
from gateway.tasks.family import Candidate, Phase, Snapshot, Submitted, TaskAdapter, TaskFamily

__all__ = ["Candidate", "NewTask", "Phase", "Snapshot", "Submitted", "TaskAdapter", "TaskEngine",
           "TaskFamily", "engine_of"]
