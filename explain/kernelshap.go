package explain

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// maxKernelBackground is the number of background rows KernelSHAP takes
// its baseline from (the first ones of the set): each coalition costs one
// model row per background row.
const maxKernelBackground = 32

// baseline is the mean model output over the background, computed once.
type baseline struct {
	mu      sync.Mutex
	mean    []float64
	classes int
}

func (e *Explainer) baseline(ctx context.Context) ([]float64, int, error) {
	e.base.mu.Lock()
	defer e.base.mu.Unlock()
	if e.base.mean != nil {
		return e.base.mean, e.base.classes, nil
	}
	out, classes, err := e.eval(ctx, e.bg, e.bgRows)
	if err != nil {
		return nil, 0, err
	}
	mean := make([]float64, classes)
	for k := range classes {
		s := 0.0
		for b := range e.bgRows {
			s += float64(out[b*classes+k])
		}
		mean[k] = s / float64(e.bgRows)
	}
	e.base.mean, e.base.classes = mean, classes
	return mean, classes, nil
}

// eval runs the model and checks the shape of what it returns.
func (e *Explainer) eval(ctx context.Context, x []float32, rows int) ([]float32, int, error) {
	out, classes, err := e.run(ctx, x, rows)
	if err != nil {
		return nil, 0, fmt.Errorf("explain: kernel_shap: %w", err)
	}
	if classes < 1 || len(out) != rows*classes {
		return nil, 0, fmt.Errorf("explain: kernel_shap: model returned %d values for %d rows of %d classes", len(out), rows, classes)
	}
	return out, classes, nil
}

// coalitions returns the feature subsets KernelSHAP evaluates, as one bool
// slice each, and their regression weights: every proper non-empty subset
// with its Shapley kernel weight (F-1)/(C(F,s)·s·(F-s)) when F ≤ 12, else
// Samples subsets drawn from a PCG seeded with (Seed, F) — a size s with
// probability proportional to (F-1)/(s·(F-s)), then s features uniformly —
// each paired with its complement, every one of weight 1.
func (e *Explainer) coalitions() ([][]bool, []float64) {
	f := e.nfeat
	var masks [][]bool
	var weights []float64
	if f <= e.exactF {
		for m := 1; m < 1<<f-1; m++ {
			z := make([]bool, f)
			s := 0
			for j := range f {
				if m>>j&1 == 1 {
					z[j] = true
					s++
				}
			}
			masks = append(masks, z)
			weights = append(weights, float64(f-1)/(binom(f, s)*float64(s)*float64(f-s)))
		}
		return masks, weights
	}
	r := rand.New(rand.NewPCG(e.seed, uint64(f)))
	sizeW := make([]float64, f)
	total := 0.0
	for s := 1; s < f; s++ {
		sizeW[s] = float64(f-1) / (float64(s) * float64(f-s))
		total += sizeW[s]
	}
	perm := make([]int, f)
	for len(masks) < e.samples {
		u := r.Float64() * total
		s := 1
		for ; s < f-1 && u >= sizeW[s]; s++ {
			u -= sizeW[s]
		}
		for j := range perm {
			perm[j] = j
		}
		z := make([]bool, f)
		for k := range s { // partial Fisher–Yates
			j := k + r.IntN(f-k)
			perm[k], perm[j] = perm[j], perm[k]
			z[perm[k]] = true
		}
		c := make([]bool, f)
		for j := range z {
			c[j] = !z[j]
		}
		masks = append(masks, z, c)
		weights = append(weights, 1, 1)
	}
	return masks, weights
}

func binom(n, k int) float64 {
	c := 1.0
	for i := 1; i <= k; i++ {
		c = c * float64(n-k+i) / float64(i)
	}
	return c
}

// kernelSHAP explains each row of x against the background; each row is
// explained alone, so its result does not depend on the batch.
func (e *Explainer) kernelSHAP(ctx context.Context, x []float32, rows int) ([]int, []float64, error) {
	mean, classes, err := e.baseline(ctx)
	if err != nil {
		return nil, nil, err
	}
	f := e.nfeat
	masks, weights := e.coalitions()
	targets := make([]int, rows)
	contrib := make([]float64, rows*(f+1))
	for i := range rows {
		row := x[i*f : (i+1)*f]
		fx, _, err := e.eval(ctx, row, 1)
		if err != nil {
			return nil, nil, err
		}
		t := 0
		for k := range classes {
			if fx[k] > fx[t] {
				t = k
			}
		}
		v, err := e.values(ctx, row, masks, classes, t)
		if err != nil {
			return nil, nil, err
		}
		phi := solve(masks, weights, v, mean[t], float64(fx[t])-mean[t])
		targets[i] = t
		out := contrib[i*(f+1) : (i+1)*(f+1)]
		copy(out, phi)
		out[f] = mean[t]
	}
	return targets, contrib, nil
}

// values returns, for each coalition, the mean over the background of the
// target score of x with the features outside the coalition taken from the
// background row, summed in background order.
func (e *Explainer) values(ctx context.Context, x []float32, masks [][]bool, classes, t int) ([]float64, error) {
	f, nb := e.nfeat, e.bgRows
	per := max(1, maxEvalRows/nb) // coalitions per model call
	v := make([]float64, len(masks))
	buf := make([]float32, 0, min(len(masks), per)*nb*f)
	for start := 0; start < len(masks); start += per {
		end := min(start+per, len(masks))
		buf = buf[:0]
		for _, z := range masks[start:end] {
			for b := range nb {
				bg := e.bg[b*f : (b+1)*f]
				for j := range f {
					if z[j] {
						buf = append(buf, x[j])
					} else {
						buf = append(buf, bg[j])
					}
				}
			}
		}
		out, c, err := e.eval(ctx, buf, (end-start)*nb)
		if err != nil {
			return nil, err
		}
		if c != classes {
			return nil, fmt.Errorf("explain: kernel_shap: model returned %d classes, then %d", classes, c)
		}
		for k := range end - start {
			s := 0.0
			for b := range nb {
				s += float64(out[(k*nb+b)*c+t])
			}
			v[start+k] = s / float64(nb)
		}
	}
	return v, nil
}

// solve fits φ to minimise Σ w·(v(z) - base - Σ_{j∈z} φ_j)² subject to
// Σ φ_j = delta, by eliminating the last feature and solving the normal
// equations with Gaussian elimination (partial pivoting), every loop in a
// fixed order. A singular system leaves the equal split delta/F.
func solve(masks [][]bool, w, v []float64, base, delta float64) []float64 {
	f := len(masks[0])
	phi := make([]float64, f+1)
	if f == 1 {
		phi[0] = delta
		return phi
	}
	n := f - 1
	a := make([]float64, n*(n+1)) // augmented [AᵀWA | AᵀWy]
	row := make([]float64, n)
	for k, z := range masks {
		last := 0.0
		if z[n] {
			last = 1
		}
		y := v[k] - base - last*delta
		for j := range n {
			row[j] = -last
			if z[j] {
				row[j]++
			}
		}
		for p := range n {
			if row[p] == 0 {
				continue
			}
			wp := w[k] * row[p]
			for q := range n {
				a[p*(n+1)+q] += float64(wp * row[q]) // float64(): no fused multiply-add, the same bits on every architecture
			}
			a[p*(n+1)+n] += float64(wp * y)
		}
	}
	x, ok := gauss(a, n)
	if !ok {
		for j := range f {
			phi[j] = delta / float64(f)
		}
		return phi
	}
	rest := delta
	for j := range n {
		phi[j] = x[j]
		rest -= x[j]
	}
	phi[n] = rest
	return phi
}

// gauss solves the n×n system in the augmented matrix a (row-major, n+1
// columns), in place.
func gauss(a []float64, n int) ([]float64, bool) {
	m := n + 1
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r*m+c]) > math.Abs(a[p*m+c]) {
				p = r
			}
		}
		if math.Abs(a[p*m+c]) < 1e-300 {
			return nil, false
		}
		if p != c {
			for k := range m {
				a[p*m+k], a[c*m+k] = a[c*m+k], a[p*m+k]
			}
		}
		for r := c + 1; r < n; r++ {
			fct := a[r*m+c] / a[c*m+c]
			if fct == 0 {
				continue
			}
			for k := c; k < m; k++ {
				a[r*m+k] -= float64(fct * a[c*m+k])
			}
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := a[r*m+n]
		for k := r + 1; k < n; k++ {
			s -= float64(a[r*m+k] * x[k])
		}
		x[r] = s / a[r*m+r]
	}
	return x, true
}
