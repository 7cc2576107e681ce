// Package audit implements vouch's tamper-evident audit log: one record per
// inference request (and per read of audit data), each a leaf of a Merkle
// tree whose signed checkpoints let anyone check, with standard tools and
// without trusting vouch, that a record is in the log and that the log was
// only ever appended to.
//
// # Records
//
// A [Record] is encoded as canonical JSON, schema version 1
// ([Record.MarshalCanonical]; [Parse] accepts nothing else), so that a
// record has exactly one byte string and one leaf hash. Input and output
// digests use a canonical tensor encoding that clients can reproduce
// ([InputDigest], with a worked example).
//
// # The log
//
// The log is a C2SP tlog-tiles log written by
// github.com/transparency-dev/tessera's POSIX driver under a directory
// ([Open]); the tree is RFC 6962's, as golang.org/x/mod/sumdb/tlog computes
// it; checkpoints are C2SP tlog-checkpoint signed notes with an Ed25519 key
// ([GenerateKey], [Checkpoint]). An entry is a record's canonical bytes; its
// leaf hash is SHA-256(0x00 | bytes).
//
// Appends go first to a write-ahead log with group commit (one write and
// one fdatasync for every append waiting at that moment), which is what
// makes a durable append cost a fraction of a millisecond; tessera then
// sequences the entries in the same order, and a restart replays what the
// write-ahead log holds beyond the tree. [Log.Append] implements
// [Appender] in two modes ([Durability]): durable (return once on disk) and
// async (return once queued, bounded, blocking when full).
//
// # Evidence
//
// [Log.Prove] and [Log.Show] return an [Inclusion]: the record, its index
// and leaf hash, an inclusion proof and the signed checkpoint, checkable
// offline with [Inclusion.Verify]. [Log.Export] writes many of them against
// one checkpoint in one file ([VerifyExport]). [Verify] recomputes the whole
// tree from the entry bundles and reports, with evidence, every entry, tile
// or checkpoint that does not agree — including a history rewritten since a
// checkpoint the auditor saved. Records are found by trace id, time, model,
// principal and status through an SQLite index (package index), which is
// a cache rebuildable from the log ([Log.RebuildIndex]).
//
// # Keys, remote logs, access trail, inputs
//
// A [Signer] signs checkpoints ([NewSigner] for a key string; a KMS or HSM
// implements the interface). [LoadKeyFile] keeps the key in a file of mode
// 0600 outside the log's directory, made on first use, when the origin is
// fixed ([LoadOrCreateKey], the key inside the directory, is what older
// versions did). Witnesses cosign checkpoints (package witness,
// [Options.Witnesses], [VerifyOptions.Witnesses]).
//
// # Damage
//
// A writable log checks its own storage when it opens: the write-ahead
// log's frames (a damaged frame with acknowledged frames after it, or a
// file cut short, fails with [ErrWAL]; [Options.RepairWAL] sets it aside,
// loudly), the write-ahead log against the tree, and the tree's tail
// against its root and the signed checkpoint ([ErrDamaged]). [Log.Query]
// checks the index against the log ([ErrIndex]); [Log.Scan] reads the
// entries themselves. docs/audit-storage.md lists every failure mode. [Log.Handler] serves the
// public files and [HTTPFS] reads them back, so [Verify] checks a remote
// log as it checks a directory. Reads of audit data are themselves logged
// as records of kind "access" ([Access]: who, what, when), appended by the
// process that holds the log — the server for its API and for reads
// reported to it, the command line when no server runs. Inputs are not in
// the log (only their digests); package capture keeps them encrypted, so
// that erasing them (destroying a key) leaves the log intact and verifiable.
// [EncodeTensors] is the canonical tensor encoding, whose SHA-256 is
// the input digest.
package audit
