package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// MetadataVersion is the format version of metadata.json, and of the
// bundle archive, that this package writes and reads.
const MetadataVersion = 1

// Metadata is metadata.json. Its fields are described in the package
// documentation.
type Metadata struct {
	FormatVersion int         `json:"formatVersion"`
	Model         Model       `json:"model"`
	Source        Artifact    `json:"source"`
	Calibration   *Artifact   `json:"calibration,omitempty"`
	Plan          PlanInfo    `json:"plan"`
	Options       RawJSON     `json:"options"`
	Environment   Environment `json:"environment"`
	StartedOn     time.Time   `json:"startedOn"`
	FinishedOn    time.Time   `json:"finishedOn"`
}

// RawJSON is a JSON value carried verbatim.
type RawJSON = json.RawMessage

// Model names what was built.
type Model struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Artifact is an input of the build, by digest.
type Artifact struct {
	Name     string `json:"name,omitempty"`     // file name or URI, for people
	Digest   string `json:"digest"`             // "sha256:…"
	Revision string `json:"revision,omitempty"` // VCS revision of the repository it came from
}

// PlanInfo describes the plan as the builder knows it; the plan itself is
// opaque to this package.
type PlanInfo struct {
	FormatVersion       string   `json:"formatVersion"`
	Digest              string   `json:"digest"`                        // set by New
	RequiredCPUFeatures []string `json:"requiredCPUFeatures,omitempty"` // cpuinfo names: "avx2", "fma"
}

// FileDigest is one file of a bundle and its digest.
type FileDigest struct {
	Name   string
	Digest string
}

// Contents are the files a builder puts in a bundle; only Plan is required.
type Contents struct {
	Plan             []byte
	BuildLog         []byte
	Report           []byte
	TimingCache      []byte
	CalibrationCache []byte
	Explain          []byte // feature names and background set (package explain's Data)
}

// New makes an unsigned bundle of c described by meta. It sets
// meta.FormatVersion and meta.Plan.Digest, and checks the rest. Nil or empty
// optional contents are left out.
func New(meta Metadata, c Contents) (*Bundle, error) {
	if len(c.Plan) == 0 {
		return nil, fmt.Errorf("bundle: New: no plan")
	}
	meta.FormatVersion = MetadataVersion
	meta.Plan.Digest = Digest(c.Plan)
	if err := meta.check(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bundle: encoding metadata: %w", err)
	}
	data = append(data, '\n')
	files := map[string][]byte{MetadataFile: data, PlanFile: c.Plan}
	for name, d := range map[string][]byte{
		BuildLogFile: c.BuildLog, ReportFile: c.Report,
		TimingCacheFile: c.TimingCache, CalibrationCacheFile: c.CalibrationCache,
		ExplainFile: c.Explain,
	} {
		if len(d) > 0 {
			files[name] = d
		}
	}
	return fromFiles(files)
}

func parseMetadata(data []byte) (Metadata, error) {
	var m Metadata
	if err := json.Unmarshal(data, &m); err != nil {
		return m, errFormat("metadata.json: %v", err)
	}
	if m.FormatVersion != MetadataVersion {
		return m, errFormat("metadata.json: format version %d, this vouch reads version %d", m.FormatVersion, MetadataVersion)
	}
	if err := m.check(); err != nil {
		return m, err
	}
	return m, nil
}

// check validates the fields that provenance and loading rely on.
func (m *Metadata) check() error {
	switch {
	case m.Model.Name == "":
		return errFormat("metadata: no model name")
	case m.Model.Version == "":
		return errFormat("metadata: model %s has no version", m.Model.Name)
	case !validDigest(m.Source.Digest):
		return errFormat("metadata: source digest %q is not sha256:<64 hex digits>", m.Source.Digest)
	case m.Calibration != nil && !validDigest(m.Calibration.Digest):
		return errFormat("metadata: calibration data digest %q is not sha256:<64 hex digits>", m.Calibration.Digest)
	case m.Plan.FormatVersion == "":
		return errFormat("metadata: no plan format version")
	case !validDigest(m.Plan.Digest):
		return errFormat("metadata: plan digest %q is not sha256:<64 hex digits>", m.Plan.Digest)
	case m.Environment.VouchVersion == "":
		return errFormat("metadata: no vouch version in the environment")
	}
	opts := bytes.TrimSpace(m.Options)
	var obj map[string]any
	if len(opts) == 0 || opts[0] != '{' || json.Unmarshal(opts, &obj) != nil || len(obj) == 0 {
		return errFormat("metadata: options must be a non-empty JSON object, not %.40q", opts)
	}
	return nil
}
