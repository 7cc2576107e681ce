package replay

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/registry"
)

// RegistryPlans loads the bundle a record names, by digest, from the
// registry (which verifies it and records the read).
type RegistryPlans struct {
	Registry  *registry.Registry
	Principal string
	Check     bundle.CheckOptions
}

// Plan implements Plans.
func (p *RegistryPlans) Plan(ctx context.Context, rec *audit.Record) (*Engine, error) {
	if rec.BundleDigest == "" {
		return nil, fmt.Errorf("record %s names no bundle (it was served from an unsigned plan); give the plan with --plan", rec.TraceID)
	}
	versions, err := p.Registry.List(ctx, rec.Model)
	if err != nil {
		return nil, err
	}
	for _, v := range versions {
		if v.Digest != rec.BundleDigest {
			continue
		}
		ref := v.Name + "@" + v.Version
		l, err := p.Registry.Load(ctx, ref, p.Principal)
		if err != nil {
			return nil, err
		}
		if _, err := bundle.Check(l.Bundle, p.Check); err != nil {
			return nil, err
		}
		return engineOf(l.Bundle, l.Provenance, v.Digest, "registry "+ref)
	}
	return nil, fmt.Errorf("no bundle with digest %s (model %s) is in the registry", rec.BundleDigest, rec.Model)
}

func engineOf(b *bundle.Bundle, prov *bundle.Provenance, bundleDigest, source string) (*Engine, error) {
	raw := b.Plan()
	p, err := plan.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	e := &Engine{Plan: p, PlanDigest: "sha256:" + plan.Digest(raw), BundleDigest: bundleDigest, Provenance: prov, Source: source}
	if d, ok := b.File(bundle.ExplainFile); ok {
		if e.Explain, err = explain.DecodeData(d); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", source, bundle.ExplainFile, err)
		}
	}
	return e, nil
}

// LoadEngine loads an engine from a file: a signed bundle (verified against
// keys and checked against this machine) or, when keys are not needed, a
// bare plan.
func LoadEngine(path string, keys []*bundle.PublicKey, check bundle.CheckOptions) (*Engine, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if bytes.HasPrefix(raw, []byte("VOUCHPLAN ")) {
		p, err := plan.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("replay: %s: %w", path, err)
		}
		return &Engine{Plan: p, PlanDigest: "sha256:" + plan.Digest(raw), Source: path}, nil
	}
	l, err := bundle.Load(bytes.NewReader(raw), bundle.LoadOptions{TrustedKeys: keys, Check: check})
	if err != nil {
		return nil, err
	}
	return engineOf(l.Bundle, l.Provenance, "sha256:"+plan.Digest(raw), path)
}

// FixedPlan always returns one engine (a plan or bundle the caller named).
type FixedPlan struct{ Engine *Engine }

// Plan implements Plans.
func (f FixedPlan) Plan(context.Context, *audit.Record) (*Engine, error) { return f.Engine, nil }
