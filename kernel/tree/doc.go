// Package tree implements the tree-ensemble operators of the ai.onnx.ml
// domain — TreeEnsembleClassifier and TreeEnsembleRegressor (opsets 1 to
// 3, every attribute form including the *_as_tensor doubles) and
// TreeEnsemble (opset 5: interior-node and leaf arrays, BRANCH_MEMBER
// sets) — and exact TreeSHAP explanations of them.
//
// # Parsing
//
// A node's attributes are parsed once per node (Prepared; the result is
// kept weakly, so it goes with the node's graph) into an Ensemble and
// validated: equal array lengths, node ids unique within a tree, every
// child present, exactly one root per tree (legacy forms) or the given
// tree_roots (opset 5), no node reached twice (cycles, shared subtrees),
// depth at most MaxDepth, feature ids in [0, MaxFeatures), class and
// target ids in range, at most MaxTargets targets. Every violation is an
// error wrapping ErrInvalid that names the tree and node; nothing a model
// claims is allocated before it is checked. A branch whose two children
// are one node is that node (opset 5 writes a one-leaf tree that way).
//
// # Semantics
//
// A branch takes its true child when its comparison holds (LEQ, LT, GTE,
// GT, EQ, NEQ, or membership in its set), or when the feature is NaN and
// nodes_missing_value_tracks_true is set for it. Comparisons are made in
// the ensemble's precision: float32 unless a threshold, weight or base
// value came as a double (the *_as_tensor forms, double nodes_splits) or
// X is double, then float64; integer inputs are rounded to float32 first,
// as ONNX Runtime casts them. Classifier outputs follow ONNX Runtime,
// special cases included (see finishClass): the binary case (two labels,
// weights on one class: XGBoost, LightGBM) gives one margin s and the
// probabilities [σ(-s), σ(s)] under LOGISTIC. Post transforms use vmath's
// float32 functions, never the platform's (PROBIT is Winitzki's erfinv,
// like ONNX Runtime's); a single-target regressor applies its
// post_transform as the specification says (ONNX Runtime applies only
// PROBIT there).
//
// # Determinism
//
// A row's scores are a pure function of the ensemble and that row:
//
//   - each target's sum starts at +0 and adds the reached leaves' weights
//     in tree order (ascending tree id for the legacy forms, tree_roots
//     order for opset 5), a leaf's weights in attribute order, each
//     addition one rounded float32 (float64 for double ensembles)
//     operation; AVERAGE then divides by the tree count and the base
//     value is added last, as ONNX Runtime does; MIN and MAX compare in
//     the same order;
//   - threads split rows (blocks of eight) and never trees, and a row's
//     result does not depend on the rows beside it, so the bits do not
//     depend on the thread count or on the batch;
//   - the two tactics, TacticCompiled (the key layout below) and
//     TacticWalk (the portable reference walk), reach the same leaves and
//     share the summation code, so they give the same bits; tests assert
//     it on random ensembles and inputs made of thresholds, their float
//     neighbours, NaN, infinities and signed zeros.
//
// # Compiled layout
//
// Nodes are laid out in preorder, tree by tree, each branch followed by
// its true child (struct of 12-byte records K, F, Hi). For float32
// ensembles whose branches all compare (LEQ, LT, GTE, GT) against
// non-NaN thresholds, each comparison and its NaN routing are rewritten
// as one integer comparison on order-preserving keys (see compiled): the
// walk is branch-free, next = key >= K ? Hi : next record, and a leaf
// loops to itself, so every tree is walked exactly its depth. Eight walks
// run interleaved — eight rows through one tree for a batch, eight trees
// for one row — to overlap their load latencies. Pure Go; measured
// against ONNX Runtime in docs/trees.md, it needed no assembly.
//
// # TreeSHAP
//
// Ensemble.SHAP is exact path-dependent TreeSHAP (Lundberg, Erion and
// Lee, Algorithm 2), O(trees · leaves · depth²) per row. It weighs the
// branches a row does not take by node covers, which ONNX files do not
// carry: covers come from SetCovers (e.g. XGBoost's cover statistics, in
// the node order documented there), from nodes_hitrates when they are not
// all equal, or from CoversFromData (the number of rows of a background
// data set reaching each node). A node of zero cover splits equally. The
// contributions of a row sum to its margin (Margin) up to float64
// rounding of a float32 sum.
package tree
