package ml

import (
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// svmKernel is an SVM's kernel function with its parameters
// (kernel_params: gamma, coef0, degree).
type svmKernel struct {
	kind                 string
	gamma, coef0, degree float32
}

func parseKernel(n *ir.Node) (svmKernel, error) {
	k := svmKernel{kind: n.String("kernel_type", "LINEAR")}
	switch k.kind {
	case "LINEAR", "POLY", "RBF", "SIGMOID":
	default:
		return k, errorf(n, "unknown kernel_type %q (LINEAR, POLY, RBF or SIGMOID)", k.kind)
	}
	p := n.Floats("kernel_params", nil)
	switch len(p) {
	case 0:
	case 3:
		k.gamma, k.coef0, k.degree = p[0], p[1], p[2]
	default:
		return k, errorf(n, "kernel_params has %d values (want gamma, coef0, degree)", len(p))
	}
	return k, nil
}

// eval returns K(x, v):
//
//	LINEAR   x·v
//	POLY     (gamma·x·v + coef0)^degree
//	RBF      exp(-gamma·|x-v|²)
//	SIGMOID  tanh(gamma·x·v + coef0)
//
// x·v and |x-v|² are FMA chains over the features in ascending order; an
// integral degree up to 64 is repeated multiplication, any other degree
// exp(degree·log b) through vmath (NaN for a negative base).
func (k svmKernel) eval(x, v []float32) float32 {
	if k.kind == "RBF" {
		var s float32
		for j, a := range x {
			d := a - v[j]
			s = vmath.FMA32(d, d, s)
		}
		return vmath.Exp32(-float32(k.gamma * s))
	}
	var dot float32
	for j, a := range x {
		dot = vmath.FMA32(a, v[j], dot)
	}
	switch k.kind {
	case "POLY":
		return powf(vmath.FMA32(k.gamma, dot, k.coef0), k.degree)
	case "SIGMOID":
		return vmath.Tanh32(vmath.FMA32(k.gamma, dot, k.coef0))
	}
	return dot
}

func powf(b, e float32) float32 {
	if e == float32(math.Trunc(float64(e))) && e >= 0 && e <= 64 {
		r := float32(1)
		for range int(e) {
			r *= b
		}
		return r
	}
	if b == 0 {
		return 0
	}
	return vmath.Exp32(float32(e * vmath.Log32(b)))
}

// svc is a parsed SVMClassifier for inputs of feat features. With
// vectors_per_class it is a kernel SVM (one-vs-one: a classifier per pair
// of classes, libsvm's layout); without, a linear SVM (liblinear: one
// coefficient row per class).
type svc struct {
	k              svmKernel
	labels         labels
	classes, feat  int
	coef, rho, sv  []float32
	perClass       []int // support vectors of each class
	start          []int // first support vector of each class
	vectors        int
	probA, probB   []float32
	tr             transform
	allPositive    bool
	pairs, outCols int
}

func parseSVC(n *ir.Node, feat int) (*svc, error) {
	p := &svc{coef: n.Floats("coefficients", nil), rho: n.Floats("rho", nil), sv: n.Floats("support_vectors", nil),
		probA: n.Floats("prob_a", nil), probB: n.Floats("prob_b", nil)}
	var err error
	if p.k, err = parseKernel(n); err != nil {
		return nil, err
	}
	if p.tr, err = parseTransform(n); err != nil {
		return nil, err
	}
	if p.labels, err = parseLabels(n, "classlabels_ints", "classlabels_strings"); err != nil {
		return nil, err
	}
	p.classes = p.labels.len()
	if p.classes == 0 {
		return nil, errorf(n, "one of classlabels_ints and classlabels_strings is required")
	}
	if p.classes > 1<<16 {
		return nil, errorf(n, "%d classes is too many (at most 65536)", p.classes)
	}
	if len(p.coef) == 0 || len(p.coef) > maxAttr || len(p.sv) > maxAttr || len(p.rho) > maxAttr {
		return nil, errorf(n, "coefficients (%d), support_vectors (%d) or rho (%d) have a bad length", len(p.coef), len(p.sv), len(p.rho))
	}
	if len(p.probA) != len(p.probB) {
		return nil, errorf(n, "prob_a has %d values and prob_b %d", len(p.probA), len(p.probB))
	}
	p.allPositive = true
	for _, c := range p.coef {
		if c < 0 {
			p.allPositive = false
		}
	}
	for i, c := range n.Ints("vectors_per_class", nil) {
		if c < 0 || c > maxAttr || int64(p.vectors)+c > maxAttr {
			return nil, errorf(n, "vectors_per_class[%d] is %d", i, c)
		}
		p.start = append(p.start, p.vectors)
		p.perClass = append(p.perClass, int(c))
		p.vectors += int(c)
	}
	p.pairs = p.classes * (p.classes - 1) / 2
	if p.vectors == 0 {
		// liblinear: coefficients [classes, feat], rho[0] the bias.
		p.k = svmKernel{kind: "LINEAR"}
		if len(p.coef)%p.classes != 0 {
			return nil, errorf(n, "%d coefficients do not make %d rows", len(p.coef), p.classes)
		}
		if f := len(p.coef) / p.classes; feat >= 0 && f != feat {
			return nil, errorf(n, "coefficients have %d features per class, input has %d", f, feat)
		} else {
			p.feat = f
		}
		if len(p.rho) < 1 {
			return nil, errorf(n, "rho is empty")
		}
		p.outCols = p.classes
		return p, nil
	}
	if len(p.perClass) != p.classes {
		return nil, errorf(n, "vectors_per_class has %d entries for %d classes", len(p.perClass), p.classes)
	}
	if p.classes < 2 {
		return nil, errorf(n, "a kernel SVM needs at least two classes")
	}
	if len(p.sv)%p.vectors != 0 {
		return nil, errorf(n, "%d support vector values do not make %d vectors", len(p.sv), p.vectors)
	}
	p.feat = len(p.sv) / p.vectors
	if feat >= 0 && p.feat != feat {
		return nil, errorf(n, "support vectors have %d features, input has %d", p.feat, feat)
	}
	if len(p.coef) != (p.classes-1)*p.vectors {
		return nil, errorf(n, "%d coefficients, want (classes-1)·vectors = %d", len(p.coef), (p.classes-1)*p.vectors)
	}
	if len(p.rho) != p.pairs {
		return nil, errorf(n, "rho has %d values, want one per pair of classes (%d)", len(p.rho), p.pairs)
	}
	if len(p.probA) > 0 && len(p.probA) != p.pairs {
		return nil, errorf(n, "prob_a has %d values, want one per pair of classes (%d)", len(p.probA), p.pairs)
	}
	switch {
	case len(p.probA) > 0:
		p.outCols = p.classes
	case p.classes == 2:
		p.outCols = 2
	default:
		p.outCols = p.pairs
	}
	return p, nil
}

// classify computes one row's label index (or -1/-2 for the binary
// fallbacks, see setBinary) into lab and its scores into out.
//
// Kernel SVM: the decision value of the pair (i, j), i < j, is
//
//	Σ_{v in class i} coef[j-1][v]·K(x, sv_v) + Σ_{v in class j} coef[i][v]·K(x, sv_v) + rho[pair]
//
// one FMA chain in that order; a positive value is a vote for i, otherwise
// for j, and the label is the class with most votes (the first on a tie).
// Without prob_a the scores are the pair values, transformed (two classes:
// the pair of transform.pair); with prob_a/prob_b each pair's Platt
// probability 1 - σ(d·A + B), clamped to [1e-7, 1-1e-7], is coupled into
// class probabilities by libsvm's multiclass_probability (Wu, Lin and Weng
// 2004, method 2), the iteration as ONNX Runtime runs it in float32.
func (p *svc) classify(x []float32, kbuf, pair, out []float32, votes []int, lab labelOut, r int) {
	if p.vectors == 0 {
		for c := range p.classes {
			acc := p.rho[0]
			w := p.coef[c*p.feat : (c+1)*p.feat]
			for j, v := range x {
				acc = vmath.FMA32(v, w[j], acc)
			}
			out[c] = acc
		}
		best := argmax(out)
		mw := out[best]
		if p.classes == 2 {
			// ONNX Runtime's ChooseClass for two classes without probabilities.
			switch {
			case p.allPositive && mw >= 0.5, mw > 0 && !p.allPositive:
				best = 1
			}
		}
		lab.setClass(r, p.labels, best)
		p.tr.apply(out)
		return
	}
	for v := range p.vectors {
		kbuf[v] = p.k.eval(x, p.sv[v*p.feat:(v+1)*p.feat])
	}
	clear(votes)
	idx := 0
	for i := 0; i < p.classes; i++ {
		for j := i + 1; j < p.classes; j++ {
			var acc float32
			ci := p.coef[(j-1)*p.vectors:]
			for v := p.start[i]; v < p.start[i]+p.perClass[i]; v++ {
				acc = vmath.FMA32(ci[v], kbuf[v], acc)
			}
			cj := p.coef[i*p.vectors:]
			for v := p.start[j]; v < p.start[j]+p.perClass[j]; v++ {
				acc = vmath.FMA32(cj[v], kbuf[v], acc)
			}
			acc += p.rho[idx]
			pair[idx] = acc
			if acc > 0 {
				votes[i]++
			} else {
				votes[j]++
			}
			idx++
		}
	}
	best := 0
	for c := 1; c < p.classes; c++ {
		if votes[c] > votes[best] {
			best = c
		}
	}
	lab.setClass(r, p.labels, best)
	switch {
	case len(p.probA) > 0:
		q := make([]float32, p.classes*p.classes)
		idx = 0
		for i := 0; i < p.classes; i++ {
			for j := i + 1; j < p.classes; j++ {
				v := 1 - vmath.Sigmoid32(vmath.FMA32(pair[idx], p.probA[idx], p.probB[idx]))
				v = min(max(v, 1e-7), 1-1e-7)
				q[i*p.classes+j] = v
				q[j*p.classes+i] = 1 - v
				idx++
			}
		}
		coupleProbabilities(p.classes, q, out)
		p.tr.apply(out)
	case p.classes == 2:
		out[0], out[1] = p.tr.pair(pair[0], true)
	default:
		copy(out, pair)
		p.tr.apply(out)
	}
}

// coupleProbabilities solves libsvm's pairwise coupling for k classes from
// r (r[i*k+j] the probability of i against j) into p.
func coupleProbabilities(k int, r, p []float32) {
	q := make([]float32, k*k)
	qp := make([]float32, k)
	for t := range k {
		p[t] = 1 / float32(k)
		var d float32
		for j := range t {
			d = vmath.FMA32(r[j*k+t], r[j*k+t], d)
			q[t*k+j] = q[j*k+t]
		}
		for j := t + 1; j < k; j++ {
			d = vmath.FMA32(r[j*k+t], r[j*k+t], d)
			q[t*k+j] = -float32(r[j*k+t] * r[t*k+j])
		}
		q[t*k+t] = d
	}
	eps := 0.005 / float32(k)
	for range max(100, k) {
		var pqp float32
		for t := range k {
			var s float32
			for j := range k {
				s = vmath.FMA32(q[t*k+j], p[j], s)
			}
			qp[t] = s
			pqp = vmath.FMA32(p[t], s, pqp)
		}
		var maxErr float32
		for t := range k {
			maxErr = max(maxErr, float32(math.Abs(float64(qp[t]-pqp))))
		}
		if maxErr < eps {
			break
		}
		for t := range k {
			diff := (pqp - qp[t]) / q[t*k+t]
			p[t] += diff
			one := 1 + diff
			pqp = vmath.FMA32(diff, vmath.FMA32(diff, q[t*k+t], float32(2*qp[t])), pqp) / one / one
			for j := range k {
				qp[j] = vmath.FMA32(diff, q[t*k+j], qp[j]) / one
				p[j] /= one
			}
		}
	}
}

func runSVMClassifier(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, rows, cols, err := floatRows(n, kernel.Input(in, 0))
	if err != nil {
		return nil, err
	}
	p, err := parseSVC(n, cols)
	if err != nil {
		return nil, err
	}
	out := []*tensor.Tensor{tensor.New(p.labels.dtype(), rows), tensor.New(tensor.Float32, rows, p.outCols)}
	lab := newLabelOut(out[0])
	scores := out[1].Data.([]float32)
	kbuf := make([]float32, p.vectors)
	pair := make([]float32, p.pairs)
	votes := make([]int, p.classes)
	for r := range rows {
		p.classify(x[r*cols:(r+1)*cols], kbuf, pair, scores[r*p.outCols:(r+1)*p.outCols], votes, lab, r)
	}
	return out, nil
}

func inferSVMClassifier(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	nf, err := inputFeatures(n, in)
	if err != nil {
		return nil, err
	}
	p, err := parseSVC(n, nf)
	if err != nil {
		return nil, err
	}
	b, _ := batchDim(in[0].Type)
	return []ir.Type{rowsType(p.labels.dtype(), b), rowsType(tensor.Float32, b, ir.Fixed(p.outCols))}, nil
}

// svr is a parsed SVMRegressor: Σ_v coef[v]·K(x, sv_v) + rho[0] over
// n_supports support vectors (or, without them, the linear x·coef +
// rho[0]); one_class maps a positive value to 1 and the rest to -1.
type svr struct {
	k        svmKernel
	coef, sv []float32
	rho      float32
	supports int
	feat     int
	oneClass bool
	tr       transform
}

func parseSVR(n *ir.Node, feat int) (*svr, error) {
	p := &svr{coef: n.Floats("coefficients", nil), sv: n.Floats("support_vectors", nil), oneClass: n.Int("one_class", 0) != 0}
	var err error
	if p.k, err = parseKernel(n); err != nil {
		return nil, err
	}
	if p.tr, err = parseTransform(n); err != nil {
		return nil, err
	}
	rho := n.Floats("rho", nil)
	if len(rho) != 1 {
		return nil, errorf(n, "rho has %d values (want 1)", len(rho))
	}
	p.rho = rho[0]
	ns := n.Int("n_supports", 0)
	if ns < 0 || ns > maxAttr || len(p.coef) > maxAttr || len(p.sv) > maxAttr {
		return nil, errorf(n, "n_supports (%d), coefficients (%d) or support_vectors (%d) have a bad size", ns, len(p.coef), len(p.sv))
	}
	p.supports = int(ns)
	if p.supports == 0 {
		p.k = svmKernel{kind: "LINEAR"}
		p.feat = len(p.coef)
	} else {
		if len(p.coef) != p.supports {
			return nil, errorf(n, "%d coefficients for %d support vectors", len(p.coef), p.supports)
		}
		if len(p.sv)%p.supports != 0 {
			return nil, errorf(n, "%d support vector values do not make %d vectors", len(p.sv), p.supports)
		}
		p.feat = len(p.sv) / p.supports
	}
	if p.feat == 0 {
		return nil, errorf(n, "no coefficients")
	}
	if feat >= 0 && feat != p.feat {
		return nil, errorf(n, "the model has %d features, input has %d", p.feat, feat)
	}
	return p, nil
}

func runSVMRegressor(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, rows, cols, err := floatRows(n, kernel.Input(in, 0))
	if err != nil {
		return nil, err
	}
	p, err := parseSVR(n, cols)
	if err != nil {
		return nil, err
	}
	y := tensor.New(tensor.Float32, rows, 1)
	out := y.Data.([]float32)
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		var s float32
		if p.supports == 0 {
			s = p.rho
			for j, v := range row {
				s = vmath.FMA32(v, p.coef[j], s)
			}
		} else {
			for v := range p.supports {
				s = vmath.FMA32(p.coef[v], p.k.eval(row, p.sv[v*cols:(v+1)*cols]), s)
			}
			s += p.rho
		}
		if p.oneClass {
			if s > 0 {
				s = 1
			} else {
				s = -1
			}
		}
		out[r] = s
		p.tr.apply(out[r : r+1])
	}
	return []*tensor.Tensor{y}, nil
}

func inferSVMRegressor(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	nf, err := inputFeatures(n, in)
	if err != nil {
		return nil, err
	}
	if _, err := parseSVR(n, nf); err != nil {
		return nil, err
	}
	b, _ := batchDim(in[0].Type)
	return []ir.Type{rowsType(tensor.Float32, b, ir.Fixed(1))}, nil
}
