package tree

import (
	"math"
	"math/rand/v2"
	"testing"
)

// condExp is E[f_t(x) | x_S] under the covers, by direct recursion: the
// value game TreeSHAP computes the Shapley values of.
func condExp(e *Ensemble, i int32, x []float64, in func(int32) bool, target int32) float64 {
	if e.mode[i] == modeLeaf {
		v := 0.0
		for k := e.wlo[i]; k < e.wlo[i+1]; k++ {
			if e.wt[k] == target {
				v += e.wv[k]
			}
		}
		return v
	}
	if in(e.feat[i]) {
		if e.goesTrue(int(i), x[e.feat[i]]) {
			return condExp(e, i+1, x, in, target)
		}
		return condExp(e, e.no[i], x, in, target)
	}
	fy, fn := e.fractions(i)
	return fy*condExp(e, i+1, x, in, target) + fn*condExp(e, e.no[i], x, in, target)
}

// bruteSHAP enumerates every feature subset.
func bruteSHAP(e *Ensemble, x []float32, nfeat int) []float64 {
	xs := make([]float64, len(x))
	for i, v := range x {
		xs[i] = float64(v)
	}
	nm := e.NumTargets()
	out := make([]float64, nm*(nfeat+1))
	fact := func(n int) float64 {
		f := 1.0
		for i := 2; i <= n; i++ {
			f *= float64(i)
		}
		return f
	}
	v := func(mask int, m int) float64 {
		s := 0.0
		for t := 0; t < e.Trees(); t++ {
			s += condExp(e, e.roots[t], xs, func(f int32) bool { return mask&(1<<f) != 0 }, int32(e.marginTarget(m)))
		}
		return s*e.shapScale() + e.marginBase(m)
	}
	for m := 0; m < nm; m++ {
		for j := 0; j < nfeat; j++ {
			for mask := 0; mask < 1<<nfeat; mask++ {
				if mask&(1<<j) != 0 {
					continue
				}
				k := 0
				for b := mask; b != 0; b &= b - 1 {
					k++
				}
				w := fact(k) * fact(nfeat-k-1) / fact(nfeat)
				out[m*(nfeat+1)+j] += w * (v(mask|1<<j, m) - v(mask, m))
			}
		}
		out[m*(nfeat+1)+nfeat] = v(0, m)
	}
	return out
}

// TestSHAPBruteForce: TreeSHAP equals the exact Shapley values of the
// cover-weighted conditional expectation, on random trees (features
// repeated along paths, NaN routing, random covers, multi-target leaves),
// and every row sums to the margin.
func TestSHAPBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, g := range []genSpec{
		{trees: 4, depth: 5, feats: 5, targets: 1, modes: []string{"BRANCH_LT", "BRANCH_LEQ", "BRANCH_GT"}, leafStop: 0.2},
		{trees: 3, depth: 4, feats: 4, targets: 3, modes: []string{"BRANCH_LEQ", "BRANCH_EQ"}, leafStop: 0.3},
		{trees: 2, depth: 6, feats: 3, targets: 2, modes: []string{"BRANCH_GTE"}, leafStop: 0},
	} {
		g.thresholds = grid
		for rep := 0; rep < 6; rep++ {
			n := genNode(rng, g)
			e, err := FromNode(n)
			if err != nil {
				t.Fatal(err)
			}
			if rep%2 == 0 {
				cv := make([]float64, e.npos)
				for i := range cv {
					cv[i] = float64(rng.IntN(5)) // zeros included
				}
				if err := e.SetCovers(cv); err != nil {
					t.Fatal(err)
				}
			} else {
				bg := genInput(rng, 50, g.feats).Data.([]float32)
				if err := e.CoversFromData(bg, 50); err != nil {
					t.Fatal(err)
				}
			}
			x := genInput(rng, 8, g.feats).Data.([]float32)
			for r := 0; r < 8; r++ {
				row := x[r*g.feats : (r+1)*g.feats]
				nf := g.feats + 1 // one feature the model never reads
				got := make([]float64, e.NumTargets()*(nf+1))
				if err := e.SHAP(row, nf, got); err != nil {
					t.Fatal(err)
				}
				want := bruteSHAP(e, append(row, 0), nf)
				margin := make([]float64, e.NumTargets())
				e.Margin(row, margin)
				for m := 0; m < e.NumTargets(); m++ {
					sum := 0.0
					for j := 0; j <= nf; j++ {
						k := m*(nf+1) + j
						sum += got[k]
						if math.Abs(got[k]-want[k]) > 1e-9*(1+math.Abs(want[k])) {
							t.Fatalf("row %d margin %d feature %d: TreeSHAP %v, brute force %v", r, m, j, got[k], want[k])
						}
					}
					if math.Abs(sum-margin[m]) > 1e-5*(1+math.Abs(margin[m])) {
						t.Fatalf("row %d margin %d: contributions sum to %v, margin %v", r, m, sum, margin[m])
					}
				}
			}
		}
	}
}
