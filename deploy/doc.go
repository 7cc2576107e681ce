// Package deploy holds what runs vouch in production, and the tests that
// keep it true to the binary: a Dockerfile (multi-stage, static, non-root),
// an OCI image builder that needs no container daemon (./image), KServe
// manifests (a ClusterServingRuntime for the Open Inference Protocol and an
// InferenceService), a Helm chart and a systemd unit. The tests render the
// manifests and check that every flag they pass exists in `vouch serve`,
// that their ports are the ports those flags open, and that their probes
// ask the endpoints the server answers.
package deploy
