package bundle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// SignEnvelope signs any payload (a verification report, say) with key and
// returns the DSSE envelope as indented JSON. payloadType names the
// payload's format.
func SignEnvelope(key *PrivateKey, payloadType string, payload []byte) ([]byte, error) {
	signer, err := dsse.NewEnvelopeSigner(dsseSigner{key})
	if err != nil {
		return nil, fmt.Errorf("bundle: signing: %w", err)
	}
	env, err := signer.SignPayload(context.Background(), payloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("bundle: signing: %w", err)
	}
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bundle: encoding envelope: %w", err)
	}
	return append(data, '\n'), nil
}

// VerifyEnvelope checks a DSSE envelope made by SignEnvelope (or any
// Ed25519 DSSE signer) against the trusted keys and returns its payload
// type, payload and the IDs of the trusted keys that signed it.
func VerifyEnvelope(data []byte, trusted []*PublicKey) (string, []byte, []string, error) {
	env, err := parseEnvelope(data)
	if err != nil {
		return "", nil, nil, err
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		return "", nil, nil, errFormat("envelope payload is not base64: %v", err)
	}
	signedBy, err := checkSignatures(env, payload, trusted)
	if err != nil {
		return "", nil, nil, err
	}
	return env.PayloadType, payload, signedBy, nil
}
