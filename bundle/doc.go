// Package bundle implements vouch's signed bundle: one archive file that
// carries an engine plan together with the evidence of how it was built, an
// in-toto/SLSA provenance statement over every file, and DSSE signatures by
// Ed25519 keys.
//
// # Archive format, version 1
//
// A bundle is an uncompressed POSIX ustar archive (archive/tar, FormatUSTAR)
// holding only regular files, at the top level, from this fixed list and in
// this order when written:
//
//	metadata.json      required  Metadata, JSON (see below)
//	plan.vouchplan     required  the engine plan, opaque here
//	build.log.jsonl    optional  the build log
//	report.json        optional  the build report
//	timing.cache       optional  the tactic timing cache
//	calibration.cache  optional  the calibration cache
//	explain.json       optional  feature names and the background set of the explanations (package explain)
//	provenance.json    required once signed: a DSSE envelope (JSON)
//
// Every header has mode 0644, uid and gid 0, empty user and group names and
// mtime 0 (1970-01-01T00:00:00Z), and the archive ends with the two zero
// blocks that Close writes, so identical contents always give identical
// bytes, and the SHA-256 of the file (the bundle digest, which the registry
// stores bundles by) depends on the contents only.
//
// A reader refuses, with an error wrapping ErrFormat: any entry that is not a
// regular file (directories, symbolic and hard links, devices, sparse files,
// global PAX headers), a name outside the list above (a name with "/", "\",
// or "..", or an absolute name, is reported as path traversal), a name seen
// twice, an entry larger than its limit (Limits), a truncated archive, and
// bytes other than zero padding after the end-of-archive marker. Entries may
// appear in any order on reading; Write always uses the order above.
//
// # metadata.json
//
// A JSON object (Metadata) whose "formatVersion" is 1: the model's name and
// version, the source ONNX file's name, SHA-256 digest and repository
// revision, the calibration data's digest, the plan's format version, digest
// and required CPU features, the build options as a JSON object, the
// environment fingerprint (OS, architecture, CPU model and features, Go
// version, vouch version and VCS revision) and the build's start and end
// times. Digests are written "sha256:" followed by 64 lowercase hex digits.
//
// # provenance.json
//
// A DSSE envelope (https://github.com/secure-systems-lab/dsse) with payload
// type "application/vnd.in-toto+json" whose payload is an in-toto Statement v1
// (https://in-toto.io/Statement/v1) with predicate type
// https://slsa.dev/provenance/v1:
//
//   - subject: every other file of the bundle, by name, with its sha256 digest;
//   - buildDefinition.buildType: BuildType;
//   - buildDefinition.externalParameters: the build options;
//   - buildDefinition.internalParameters: the environment fingerprint;
//   - buildDefinition.resolvedDependencies: the source ONNX file (annotated
//     with its revision when known) and the calibration data, by digest;
//   - runDetails.builder.id: BuilderID(vouch version, VCS revision), with
//     the versions of vouch and Go in builder.version;
//   - runDetails.metadata: the build's start and end times;
//   - runDetails.byproducts: the build log and the build report, by digest.
//
// The statement is encoded as compact JSON with sorted object keys, so that
// re-signing identical contents yields an identical payload. Each signature is
// Ed25519 over the DSSE pre-authentication encoding, and its keyid is the
// signer's key ID, "NAME+HASH" in the signed-note sense (see PublicKey).
// Verification does not rely on keyid: a signature made by another in-toto
// tool with any keyid is accepted if one of the trusted keys verifies it.
//
// # Keys
//
// Keys are golang.org/x/mod/sumdb/note Ed25519 keys. The private key file
// holds the note signer key ("PRIVATE+KEY+NAME+HASH+BASE64") and a newline,
// with mode 0600; the public key is the note verifier key
// ("NAME+HASH+BASE64"), which may be passed around as a string.
//
// # Loading
//
// Read parses a bundle's structure; Verify checks its signatures against
// trusted keys and every file's digest against the signed subjects and
// returns a Provenance a person can read; Check compares the bundle's
// requirements (plan format version, CPU features, vouch version) with the
// running engine; Load does all three, and is what a runtime calls.
package bundle
