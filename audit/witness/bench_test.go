package witness_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/vouchml/vouch/audit"
	"github.com/vouchml/vouch/audit/witness"
)

// memTree is an in-memory RFC 6962 tree for the benchmark.
type memTree struct{ hashes []tlog.Hash }

func (m *memTree) ReadHashes(ix []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(ix))
	for i, x := range ix {
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memTree) add(n int64, leaf []byte) (tlog.Hash, error) {
	hs, err := tlog.StoredHashes(n, leaf, m)
	if err != nil {
		return tlog.Hash{}, err
	}
	m.hashes = append(m.hashes, hs...)
	return tlog.TreeHash(n+1, m)
}

// publisher makes the next checkpoint of a growing log: one more entry,
// the new root, signed. It is what publishing costs without witnesses.
type publisher struct {
	tree   memTree
	size   int64
	signer note.Signer
}

func (p *publisher) next(b *testing.B) []byte {
	root, err := p.tree.add(p.size, fmt.Appendf(nil, "entry %d", p.size))
	if err != nil {
		b.Fatal(err)
	}
	p.size++
	msg, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n%d\n%s\n", origin, p.size, base64.StdEncoding.EncodeToString(root[:]))}, p.signer)
	if err != nil {
		b.Fatal(err)
	}
	return msg
}

func newPublisher(b *testing.B) (*publisher, string) {
	skey, vkey, err := audit.GenerateKey(origin)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	return &publisher{signer: s}, vkey
}

// BenchmarkPublish/sign is a checkpoint signed and nothing else;
// BenchmarkPublish/cosign adds what a witness costs: the consistency proof,
// the add-checkpoint round trip to a real litewitness on loopback (which
// verifies, checks the proof, stores and cosigns) and the check of its
// cosignature. The difference is what cosigning adds to publication.
func BenchmarkPublish(b *testing.B) {
	b.Run("sign", func(b *testing.B) {
		p, _ := newPublisher(b)
		for b.Loop() {
			p.next(b)
		}
	})
	b.Run("cosign", func(b *testing.B) {
		p, vkey := newPublisher(b)
		w := startWitness(b, "witness.test/bench", vkey)
		c := &witness.Cosigner{Witnesses: []witness.Witness{w}}
		ctx := context.Background()
		for b.Loop() {
			cp := p.next(b)
			size := p.size
			tree := tlog.Tree{N: size}
			_, errs := c.Cosign(ctx, cp, uint64(size), func(old uint64) (tlog.TreeProof, error) {
				return tlog.ProveTree(tree.N, int64(old), &p.tree)
			})
			if errs[0] != nil {
				b.Fatal(errs[0])
			}
		}
	})
}
