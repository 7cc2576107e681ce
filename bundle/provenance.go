package bundle

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Constants of the provenance statement.
const (
	PayloadType   = "application/vnd.in-toto+json"
	PredicateType = "https://slsa.dev/provenance/v1"
	BuildType     = "https://github.com/vouchml/vouch/buildtypes/plan/v1"
	builderRepo   = "https://github.com/vouchml/vouch"
)

// BuilderID returns the SLSA builder id of a vouch version and VCS
// revision: "https://github.com/vouchml/vouch@VERSION", with
// "?revision=REV" when the revision is known.
func BuilderID(version, revision string) string {
	id := builderRepo + "@" + version
	if revision != "" {
		id += "?revision=" + url.QueryEscape(revision)
	}
	return id
}

// statement derives the provenance statement from the bundle's files and
// metadata and returns its canonical JSON encoding.
func (b *Bundle) statement() ([]byte, error) {
	m := b.meta
	opts, err := toStruct(m.Options)
	if err != nil {
		return nil, fmt.Errorf("bundle: options: %w", err)
	}
	envJSON, err := json.Marshal(m.Environment)
	if err != nil {
		return nil, fmt.Errorf("bundle: environment: %w", err)
	}
	env, err := toStruct(envJSON)
	if err != nil {
		return nil, fmt.Errorf("bundle: environment: %w", err)
	}
	deps := []*intoto.ResourceDescriptor{artifactRD(m.Source, "source.onnx")}
	if m.Calibration != nil {
		deps = append(deps, artifactRD(*m.Calibration, "calibration-data"))
	}
	var byproducts []*intoto.ResourceDescriptor
	for _, name := range []string{BuildLogFile, ReportFile} {
		if data, ok := b.files[name]; ok {
			byproducts = append(byproducts, fileRD(name, data))
		}
	}
	version := map[string]string{"vouch": m.Environment.VouchVersion, "go": m.Environment.GoVersion}
	if m.Environment.VouchRevision != "" {
		version["revision"] = m.Environment.VouchRevision
	}
	run := &slsa.RunDetails{
		Builder: &slsa.Builder{
			Id:      BuilderID(m.Environment.VouchVersion, m.Environment.VouchRevision),
			Version: version,
		},
		Byproducts: byproducts,
	}
	if !m.StartedOn.IsZero() || !m.FinishedOn.IsZero() {
		run.Metadata = &slsa.BuildMetadata{}
		if !m.StartedOn.IsZero() {
			run.Metadata.StartedOn = timestamppb.New(m.StartedOn)
		}
		if !m.FinishedOn.IsZero() {
			run.Metadata.FinishedOn = timestamppb.New(m.FinishedOn)
		}
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            BuildType,
			ExternalParameters:   opts,
			InternalParameters:   &structpb.Struct{Fields: map[string]*structpb.Value{"environment": structpb.NewStructValue(env)}},
			ResolvedDependencies: deps,
		},
		RunDetails: run,
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("bundle: provenance: %w", err)
	}
	predJSON, err := protojson.Marshal(pred)
	if err != nil {
		return nil, fmt.Errorf("bundle: provenance: %w", err)
	}
	predStruct, err := toStruct(predJSON)
	if err != nil {
		return nil, fmt.Errorf("bundle: provenance: %w", err)
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		PredicateType: PredicateType,
		Predicate:     predStruct,
	}
	for _, name := range b.Names() {
		if name != ProvenanceFile {
			st.Subject = append(st.Subject, fileRD(name, b.files[name]))
		}
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("bundle: statement: %w", err)
	}
	raw, err := protojson.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("bundle: statement: %w", err)
	}
	return canonicalJSON(raw)
}

func fileRD(name string, data []byte) *intoto.ResourceDescriptor {
	return &intoto.ResourceDescriptor{Name: name, Digest: map[string]string{"sha256": strings.TrimPrefix(Digest(data), "sha256:")}}
}

func artifactRD(a Artifact, defaultName string) *intoto.ResourceDescriptor {
	name := a.Name
	if name == "" {
		name = defaultName
	}
	rd := &intoto.ResourceDescriptor{Name: name, Digest: map[string]string{"sha256": strings.TrimPrefix(a.Digest, "sha256:")}}
	if a.Revision != "" {
		rd.Annotations = &structpb.Struct{Fields: map[string]*structpb.Value{"revision": structpb.NewStringValue(a.Revision)}}
	}
	return rd
}

// toStruct converts a JSON object to a structpb.Struct.
func toStruct(data []byte) (*structpb.Struct, error) {
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(data, s); err != nil {
		return nil, err
	}
	return s, nil
}

// canonicalJSON re-encodes JSON compactly with sorted keys: protojson's
// output is deliberately unstable, and a payload must be reproducible.
func canonicalJSON(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// dsseSigner adapts a PrivateKey to dsse.Signer.
type dsseSigner struct{ k *PrivateKey }

func (s dsseSigner) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.k.priv, data), nil
}
func (s dsseSigner) KeyID() (string, error) { return s.k.ID(), nil }

// Sign signs the bundle's provenance statement with key, writing
// provenance.json. If the bundle is already signed over exactly the same
// statement, the signature is added to the others (co-signing); otherwise
// the old envelope, which no longer matches the contents, is replaced.
func Sign(b *Bundle, key *PrivateKey) error {
	payload, err := b.statement()
	if err != nil {
		return err
	}
	var env *dsse.Envelope
	if old, ok := b.files[ProvenanceFile]; ok {
		if e, err := parseEnvelope(old); err == nil {
			if body, err := e.DecodeB64Payload(); err == nil && bytes.Equal(body, payload) && e.PayloadType == PayloadType {
				env = e
			}
		}
	}
	if env == nil {
		signer, err := dsse.NewEnvelopeSigner(dsseSigner{key})
		if err != nil {
			return fmt.Errorf("bundle: signing: %w", err)
		}
		env, err = signer.SignPayload(context.Background(), PayloadType, payload)
		if err != nil {
			return fmt.Errorf("bundle: signing: %w", err)
		}
	} else {
		for _, s := range env.Signatures {
			if s.KeyID == key.ID() {
				return nil // already signed by this key
			}
		}
		sig := ed25519.Sign(key.priv, dsse.PAE(PayloadType, payload))
		env.Signatures = append(env.Signatures, dsse.Signature{KeyID: key.ID(), Sig: base64.StdEncoding.EncodeToString(sig)})
	}
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return fmt.Errorf("bundle: encoding envelope: %w", err)
	}
	b.files[ProvenanceFile] = append(data, '\n')
	return nil
}

func parseEnvelope(data []byte) (*dsse.Envelope, error) {
	var env dsse.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, errFormat("provenance.json is not a DSSE envelope: %v", err)
	}
	return &env, nil
}

// Provenance is what a verified bundle says about itself, for people.
type Provenance struct {
	Model       Model
	Plan        PlanInfo
	Source      Artifact
	Calibration *Artifact
	BuilderID   string
	Environment Environment // where and by which vouch it was built
	StartedOn   time.Time
	FinishedOn  time.Time
	Options     RawJSON
	SignedBy    []string     // IDs of the trusted keys whose signatures verified
	Files       []FileDigest // every file the signature covers
}

// Verify checks b's signatures against trusted and every file's digest
// against the signed statement, and returns what the bundle says about its
// build. It refuses an unsigned bundle, one signed by no trusted key, one
// whose files differ from, are missing from, or are not covered by, the
// statement, and one whose metadata contradicts the statement.
func Verify(b *Bundle, trusted []*PublicKey) (*Provenance, error) {
	data, ok := b.files[ProvenanceFile]
	if !ok {
		return nil, fmt.Errorf("%w: the bundle has no %s (sign it with vouch sign)", ErrUnsigned, ProvenanceFile)
	}
	env, err := parseEnvelope(data)
	if err != nil {
		return nil, err
	}
	if env.PayloadType != PayloadType {
		return nil, errFormat("provenance.json has payload type %q, want %q", env.PayloadType, PayloadType)
	}
	if len(env.Signatures) == 0 {
		return nil, fmt.Errorf("%w: provenance.json has no signature", ErrUnsigned)
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return nil, errFormat("provenance.json payload: %v", err)
	}
	signedBy, err := checkSignatures(env, payload, trusted)
	if err != nil {
		return nil, err
	}

	// The statement is authentic; now the files must be the ones it names.
	var st intoto.Statement
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(payload, &st); err != nil {
		return nil, errFormat("provenance statement: %v", err)
	}
	if err := st.Validate(); err != nil {
		return nil, errFormat("provenance statement: %v", err)
	}
	if st.PredicateType != PredicateType {
		return nil, errFormat("provenance statement has predicate type %q, want %q", st.PredicateType, PredicateType)
	}
	signed := make(map[string]string)
	for _, s := range st.Subject {
		h, ok := s.Digest["sha256"]
		if !ok {
			return nil, errFormat("provenance subject %q has no sha256 digest", s.Name)
		}
		if _, dup := signed[s.Name]; dup {
			return nil, errFormat("provenance names subject %q twice", s.Name)
		}
		signed[s.Name] = "sha256:" + h
	}
	var files []FileDigest
	for _, name := range b.Names() {
		if name == ProvenanceFile {
			continue
		}
		got := Digest(b.files[name])
		want, ok := signed[name]
		if !ok {
			return nil, fmt.Errorf("%w: %s (%s) is not covered by the signed provenance", ErrTampered, name, got)
		}
		if got != want {
			return nil, &DigestMismatchError{Name: name, Got: got, Signed: want}
		}
		files = append(files, FileDigest{Name: name, Digest: got})
		delete(signed, name)
	}
	for name, want := range signed {
		return nil, fmt.Errorf("%w: %s (%s) is in the signed provenance but missing from the bundle", ErrTampered, name, want)
	}
	m := b.meta
	if got := Digest(b.files[PlanFile]); m.Plan.Digest != got {
		return nil, fmt.Errorf("%w: metadata.json gives plan digest %s, but %s has %s", ErrTampered, m.Plan.Digest, PlanFile, got)
	}
	var pred slsa.Provenance
	if pj, err := protojson.Marshal(st.Predicate); err != nil {
		return nil, errFormat("provenance predicate: %v", err)
	} else if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(pj, &pred); err != nil {
		return nil, errFormat("provenance predicate: %v", err)
	}
	if err := pred.Validate(); err != nil {
		return nil, errFormat("provenance predicate: %v", err)
	}
	return &Provenance{
		Model:       m.Model,
		Plan:        m.Plan,
		Source:      m.Source,
		Calibration: m.Calibration,
		BuilderID:   pred.GetRunDetails().GetBuilder().GetId(),
		Environment: m.Environment,
		StartedOn:   m.StartedOn,
		FinishedOn:  m.FinishedOn,
		Options:     m.Options,
		SignedBy:    signedBy,
		Files:       files,
	}, nil
}

// checkSignatures returns the IDs of the trusted keys that signed payload.
// A signature's keyid only orders the search: another tool's keyid (a
// fingerprint, say) still verifies against the trusted key it was made with.
func checkSignatures(env *dsse.Envelope, payload []byte, trusted []*PublicKey) ([]string, error) {
	pae := dsse.PAE(env.PayloadType, payload)
	var signedBy, claimed, ids []string
	for _, s := range env.Signatures {
		ids = append(ids, s.KeyID)
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil {
			if sig, err = base64.URLEncoding.DecodeString(s.Sig); err != nil {
				return nil, errFormat("provenance.json: signature by %q is not base64", s.KeyID)
			}
		}
		named := false
		for _, k := range trusted {
			if k.id == s.KeyID {
				named = true
			}
		}
		if named {
			claimed = append(claimed, s.KeyID)
		}
		for _, k := range trusted {
			if named && k.id != s.KeyID {
				continue
			}
			if ed25519.Verify(k.key, pae, sig) && !contains(signedBy, k.id) {
				signedBy = append(signedBy, k.id)
				break
			}
		}
	}
	if len(signedBy) > 0 {
		return signedBy, nil
	}
	if len(claimed) > 0 {
		return nil, fmt.Errorf("%w: the signature by %s does not verify: provenance.json was altered after signing", ErrBadSignature, strings.Join(claimed, ", "))
	}
	return nil, &UntrustedError{KeyIDs: ids}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// String formats the provenance for a person.
func (p *Provenance) String() string {
	var b strings.Builder
	line := func(k, format string, args ...any) {
		fmt.Fprintf(&b, "%-12s %s\n", k, fmt.Sprintf(format, args...))
	}
	line("model", "%s@%s", p.Model.Name, p.Model.Version)
	feat := "no special CPU features"
	if len(p.Plan.RequiredCPUFeatures) > 0 {
		feat = "needs " + strings.Join(p.Plan.RequiredCPUFeatures, ", ")
	}
	line("plan", "%s (format %s, %s)", p.Plan.Digest, p.Plan.FormatVersion, feat)
	line("source", "%s", describeArtifact(p.Source))
	if p.Calibration != nil {
		line("calibration", "%s", describeArtifact(*p.Calibration))
	}
	e := p.Environment
	rev := e.VouchRevision
	if rev == "" {
		rev = "unknown revision"
	} else if e.VouchModified {
		rev += ", modified"
	}
	line("built by", "vouch %s (%s, %s)", e.VouchVersion, rev, e.GoVersion)
	line("builder id", "%s", p.BuilderID)
	cpu := e.CPUModel
	if cpu == "" {
		cpu = "unknown CPU"
	}
	line("built on", "%s/%s, %s", e.OS, e.Arch, cpu)
	if len(e.CPUFeatures) > 0 {
		line("cpu flags", "%s", strings.Join(e.CPUFeatures, " "))
	}
	if !p.StartedOn.IsZero() || !p.FinishedOn.IsZero() {
		line("built at", "%s, finished %s (%s)", p.StartedOn.UTC().Format(time.RFC3339), p.FinishedOn.UTC().Format(time.RFC3339), p.FinishedOn.Sub(p.StartedOn).Round(time.Millisecond))
	}
	var opts bytes.Buffer
	if json.Indent(&opts, p.Options, strings.Repeat(" ", 13), "  ") != nil {
		opts.Reset()
		opts.Write(p.Options)
	}
	line("options", "%s", opts.String())
	line("signed by", "%s", strings.Join(p.SignedBy, ", "))
	for i, f := range p.Files {
		k := ""
		if i == 0 {
			k = "files"
		}
		line(k, "%-18s %s", f.Name, f.Digest)
	}
	return b.String()
}

func describeArtifact(a Artifact) string {
	s := a.Digest
	if a.Name != "" {
		s = a.Name + " " + s
	}
	if a.Revision != "" {
		s += " (revision " + a.Revision + ")"
	}
	return s
}
