// Package explain computes the reasons behind a model's decisions: for
// each row of a request, every feature's contribution to the score the
// decision came from, and the few largest of them, the principal reasons
// that a declined applicant is owed (US adverse-action notices, the EU AI
// Act's transparency duties).
//
// The attribution depends on the model's structure, found in its graph:
//
//   - a tree ensemble (TreeEnsembleClassifier, TreeEnsembleRegressor,
//     TreeEnsemble reading the graph's input): exact path-dependent
//     TreeSHAP (kernel/tree) of the margin, the raw score before the post
//     transform. ONNX trees carry no node covers, so the covers are counted
//     from a background set kept in the bundle; the record says so.
//   - a linear model (LinearClassifier, LinearRegressor, optionally after a
//     Scaler): exact contributions coef·x of the margin (kernel/ml), in
//     terms of the raw input features when a Scaler leads (its affine map
//     is folded into the coefficients and the bias).
//   - any other model: KernelSHAP (Lundberg and Lee, 2017) against a
//     background set kept in the bundle, with every coalition enumerated
//     when there are at most 12 features and a fixed-seed sample of them
//     otherwise, solved by one weighted least-squares fit in a fixed order.
//     It is an estimate, and marked so.
//
// Every method is deterministic: a row's contributions are a pure function
// of (plan, background, row), the same at any thread count and in any
// batch, so replay recomputes them bit for bit. The digest of a batch's
// full contribution vectors is audit.ContributionsDigest.
package explain
