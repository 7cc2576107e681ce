package bundle_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/vouchml/vouch/bundle"
)

// Build a bundle, sign it, and load it as a runtime would.
func Example() {
	_, key, err := bundle.GenerateKey(nil, "vouch-ci")
	if err != nil {
		log.Fatal(err)
	}
	meta := bundle.Metadata{
		Model:       bundle.Model{Name: "credit-risk", Version: "2.1.0"},
		Source:      bundle.Artifact{Name: "credit_risk.onnx", Digest: bundle.Digest([]byte("onnx"))},
		Plan:        bundle.PlanInfo{FormatVersion: "1"},
		Options:     json.RawMessage(`{"precision":"fp32"}`),
		Environment: bundle.HostEnvironment("0.1.0"),
		StartedOn:   time.Now(),
		FinishedOn:  time.Now(),
	}
	b, err := bundle.New(meta, bundle.Contents{Plan: []byte("plan bytes"), BuildLog: []byte("{}\n")})
	if err != nil {
		log.Fatal(err)
	}
	if err := bundle.Sign(b, key); err != nil {
		log.Fatal(err)
	}
	var file bytes.Buffer
	b.WriteTo(&file)

	loaded, err := bundle.Load(&file, bundle.LoadOptions{
		TrustedKeys: []*bundle.PublicKey{key.Public()},
		Check:       bundle.CheckOptions{PlanFormats: []string{"1"}, VouchVersion: "0.1.2"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Split(loaded.Provenance.String(), "\n")[0])
	fmt.Println(string(loaded.Bundle.Plan()))
	// Output:
	// model        credit-risk@2.1.0
	// plan bytes
}
