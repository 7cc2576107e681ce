package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/registry"
)

func Example() {
	ctx := context.Background()
	_, key, _ := bundle.GenerateKey(nil, "vouch-ci")
	b, _ := bundle.New(bundle.Metadata{
		Model:       bundle.Model{Name: "credit-risk", Version: "2.1.0"},
		Source:      bundle.Artifact{Digest: bundle.Digest([]byte("onnx"))},
		Plan:        bundle.PlanInfo{FormatVersion: "1"},
		Options:     json.RawMessage(`{"precision":"fp32"}`),
		Environment: bundle.HostEnvironment("0.1.0"),
	}, bundle.Contents{Plan: []byte("plan")})
	bundle.Sign(b, key)

	dir, _ := os.MkdirTemp("", "registry")
	defer os.RemoveAll(dir)
	reg, err := registry.Open(registry.Options{Dir: dir, TrustedKeys: []*bundle.PublicKey{key.Public()}})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.Push(ctx, bytes.NewReader(b.Encode()), registry.PushOptions{Principal: "ci"}); err != nil {
		log.Fatal(err)
	}
	if _, err := reg.Tag(ctx, "credit-risk@2.1.0", "prod", "alice"); err != nil {
		log.Fatal(err)
	}
	l, err := reg.Load(ctx, "credit-risk@prod", "server")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(l.Version.Ref(), string(l.Bundle.Plan()))
	_, err = reg.Push(ctx, bytes.NewReader(b.Encode()), registry.PushOptions{Principal: "ci"})
	fmt.Println(err != nil)
	// Output:
	// credit-risk@2.1.0 plan
	// true
}
