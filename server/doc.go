// Package server serves vouch engine plans over the Open Inference Protocol
// (KServe v2), over HTTP/JSON with the binary tensor data extension and over
// gRPC (inference.GRPCInferenceService), and leaves one audit record per
// inference request, served or refused.
//
// # Endpoints
//
//	GET  /v2/health/live                              200 {"live":true}
//	GET  /v2/health/ready                             200 {"ready":true}, 400 when not (4xx = false)
//	GET  /v2                                          server metadata: name, version, extensions
//	GET  /v2/models/{m}[/versions/{v}]                model metadata: name, versions, platform, inputs, outputs
//	GET  /v2/models/{m}[/versions/{v}]/ready          200 {"name","ready":true}, 400 when not
//	POST /v2/models/{m}[/versions/{v}]/infer          inference (JSON, or binary with Inference-Header-Content-Length)
//	POST /v2/repository/index                         [{"name","version","state","reason"}]
//	POST /v2/repository/models/{m}/load|unload        {} — models given at start only
//	GET  /metrics                                     Prometheus, prefix vouch_
//	GET  /v1/audit/records/{trace}                    role audit: record, index, inclusion proof, signed checkpoint
//	GET  /v1/audit/records?model=&since=&…            role audit: JSON lines {"index","record"}
//	GET  /v1/audit/export?model=&since=&…             role audit: export file (records, proofs, checkpoint)
//	POST /v1/audit/access                             role audit: record a read of audit data done elsewhere
//	GET  /log/checkpoint, /log/tile/<L>/…             no auth: the checkpoint (text/plain) and hash tiles, C2SP tlog-tiles
//	GET  /log/tile/entries/…                          role audit: entry bundles (the records), each read recorded
//
// Errors are {"error": message, "trace_id": id} with 400 (bad request or
// tensors), 401 (no or bad credentials; WWW-Authenticate: Bearer), 403 (role
// missing), 404 (unknown model, version or endpoint), 413 (body over the
// protocol's limit, or tensors over the request's budget), 499 (the client
// went away), 503 (queue full, model not ready, shutting down, audit log
// unavailable; Retry-After), 504 (no answer within Options.RequestTimeout)
// or 500 (an engine fault: a kernel that panicked; its stack goes to the
// log, not the client). An error a plan returns for inputs that passed its
// checks — an index past a table, a sequence longer than the positions — is
// the inputs' doing and answered 400: a plan is a pure function of its
// inputs. gRPC maps the codes to InvalidArgument, Unauthenticated,
// PermissionDenied, NotFound, ResourceExhausted, Canceled, Unavailable,
// DeadlineExceeded and Internal, and vouch_requests_total counts gRPC
// calls under those names.
//
// # Limits
//
// Every size a request claims is bounded before it is allocated: the body
// per protocol (Options.MaxJSONBytes, MaxBodyBytes with binary tensor data,
// MaxGRPCBytes), the number of inputs and the bytes of its tensors
// together, from their shapes (Limits: the memory budget of one request).
// JSON tensor data is converted straight from the body into the tensor's
// typed slice: decoding a 60 MiB FP16 JSON request allocates the 20 MiB of
// its tensor (it took 2.4 GiB). Connections are bounded in number, in all
// and per source address, and in time (HTTPLimits: header, body and idle
// timeouts), so that slow clients cannot hold the server; a request's
// engine run stops between nodes when its client leaves or its timeout
// passes.
//
// # Trace and audit
//
// A valid W3C traceparent header (gRPC metadata "traceparent") is
// continued; otherwise a trace id is generated. Every response carries
// traceparent (this server's span), Vouch-Trace-Id, and, for audited
// inference, Vouch-Log-Index and Vouch-Leaf-Hash; the inference response's
// "parameters" repeat them as trace_id, log_index and leaf_hash, with
// output_label and confidence when the model declares labels. The
// request's "id" is echoed in the response, X-Request-Id in the headers.
//
// Nothing a client sends can make its record unwritable: every
// client-supplied field (request id, traceparent, model name, error
// messages that echo names, tensor names, access targets) is bounded and
// made valid UTF-8 before it reaches the record, a cut field keeping
// "…[cut N bytes sha256:HEX]" (the original's length and digest); at most
// 32 per-tensor digests are kept (the input digest covers every tensor);
// and should the log still refuse a record, its minimal form is appended.
// A request id over 256 bytes or not UTF-8 is answered 400, with its
// record. An alarm (vouch_audit_alarm, an error log line) is never
// discarded, even without an access log.
//
// The audit record is audit.Record (package audit defines its schema and
// canonical encoding; the server keeps no copy of it); its input and output
// digests are audit.InputDigest's (docs/audit-digest.md). A record that cannot be appended fails the
// request with 503, so nothing is served unaudited — unless
// Options.AuditFailOpen, which serves it, counts it in
// vouch_audit_failures_total{outcome="served"} and raises vouch_audit_alarm
// (and an error log line with alarm=audit_unavailable) until an append
// succeeds again. The transparency log (*audit.Log) is an [Appender]
// itself; [FileAppender] keeps the canonical records as lines without proofs.
//
// Every read of audit data through the API (show, query, export) first
// appends an access record (kind "access": principal, source, action,
// target, time) and is refused with 503 if it cannot; a caller without the
// audit role is refused and the refusal recorded. POST /v1/audit/access
// records a read done elsewhere — the command line reading the log's files
// while this server holds the log, or a replay — under the caller's name.
// With Options.Capture, the inputs of every served request are kept,
// encrypted, keyed by input digest (package audit/capture).
//
// # Engine pool
//
// Each model has a pool of workers fed by a bounded queue (503 when full).
// With PoolOptions.MaxBatch > 1 and a model whose inputs and outputs share a
// symbolic dimension 0, a worker stacks waiting requests into one run, up to
// MaxBatch rows or MaxDelay; the engine's batch invariance makes every row's
// output bit-identical to an unbatched run (TestBatchingBitIdentical).
// [Server.Drain] answers and audits everything in flight before the pools
// close.
//
// # Auth
//
// [Credentials] map SHA-256 hashes of bearer tokens and verified client
// certificate common names to principals with roles: infer (inference and
// metadata), audit, admin (the repository; implies the others). Health and
// /metrics need no credentials. Without credentials every caller is
// "anonymous" with Options.AnonymousRoles, by default infer only.
package server
