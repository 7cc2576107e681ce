#!/usr/bin/python3
"""make-xgb-fixture.py trains a small XGBoost model and writes the TreeSHAP
reference fixture of kernel/tree (kernel/tree/testdata/xgb_*):

  xgb_small.onnx     the model as an ai.onnx.ml TreeEnsembleClassifier, written
                     here with onnx.helper from XGBoost's JSON dump (BRANCH_LT,
                     missing values tracking the default direction, LOGISTIC)
  xgb_covers.txt     one cover per node, in the order of the nodes_* attributes
  xgb_x.txt          the rows explained (NaNs included)
  xgb_contribs.txt   XGBoost's pred_contribs for those rows (features, then
                     the expected margin), and xgb_margin.txt its margins

Needs Debian's python3-xgboost (1.7) and python3-onnx. Run from anywhere:
    /usr/bin/python3 scripts/make-xgb-fixture.py
The outputs are deterministic for a given XGBoost version (seeded data,
exact tree method, one thread).
"""
import json
import os
import sys

import numpy as np
import onnx
import xgboost as xgb
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernel", "tree", "testdata")
N_FEAT, N_TREES, DEPTH = 6, 20, 4


def data(rng, n):
    x = rng.normal(size=(n, N_FEAT)).astype(np.float32)
    logit = 1.5 * x[:, 0] - x[:, 1] * x[:, 2] + np.sin(2 * x[:, 3]) + 0.5 * (x[:, 4] > 0.3)
    y = (logit + 0.3 * rng.normal(size=n) > 0).astype(np.float32)
    x[rng.random(size=x.shape) < 0.08] = np.nan  # missing values
    return x, y


def main():
    rng = np.random.default_rng(7)
    x, y = data(rng, 2000)
    params = {"objective": "binary:logistic", "max_depth": DEPTH, "eta": 0.3, "tree_method": "exact",
              "nthread": 1, "seed": 0, "base_score": 0.5}
    bst = xgb.train(params, xgb.DMatrix(x, label=y, missing=np.nan), num_boost_round=N_TREES)
    trees = [json.loads(t) for t in bst.get_dump(dump_format="json", with_stats=True)]

    nodes = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values", "truenodeids",
                             "falsenodeids", "missing", "cover")}
    cls = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}

    def walk(t, n):
        nodes["treeids"].append(t)
        nodes["nodeids"].append(n["nodeid"])
        nodes["cover"].append(n["cover"])
        if "leaf" in n:
            for k, v in (("featureids", 0), ("modes", "LEAF"), ("values", 0.0), ("truenodeids", 0),
                         ("falsenodeids", 0), ("missing", 0)):
                nodes[k].append(v)
            cls["treeids"].append(t)
            cls["nodeids"].append(n["nodeid"])
            cls["ids"].append(0)
            cls["weights"].append(n["leaf"])
            return
        nodes["featureids"].append(int(n["split"][1:]))  # "f3"
        nodes["modes"].append("BRANCH_LT")  # XGBoost: x < split goes to "yes"
        nodes["values"].append(n["split_condition"])
        nodes["truenodeids"].append(n["yes"])
        nodes["falsenodeids"].append(n["no"])
        nodes["missing"].append(1 if n["missing"] == n["yes"] else 0)
        for c in n["children"]:
            walk(t, c)

    for t, tree in enumerate(trees):
        walk(t, tree)

    node = helper.make_node(
        "TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain="ai.onnx.ml",
        nodes_treeids=nodes["treeids"], nodes_nodeids=nodes["nodeids"], nodes_featureids=nodes["featureids"],
        nodes_modes=nodes["modes"], nodes_values=nodes["values"], nodes_truenodeids=nodes["truenodeids"],
        nodes_falsenodeids=nodes["falsenodeids"], nodes_missing_value_tracks_true=nodes["missing"],
        nodes_hitrates=[1.0] * len(nodes["modes"]),
        class_treeids=cls["treeids"], class_nodeids=cls["nodeids"], class_ids=cls["ids"],
        class_weights=cls["weights"], classlabels_int64s=[0, 1], base_values=[0.0],
        post_transform="LOGISTIC")
    graph = helper.make_graph(
        [node], "xgb_small",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", N_FEAT])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
         helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 8
    onnx.checker.check_model(model)

    xt, _ = data(np.random.default_rng(11), 64)
    dt = xgb.DMatrix(xt, missing=np.nan)
    contribs = bst.predict(dt, pred_contribs=True)
    margin = bst.predict(dt, output_margin=True)

    os.makedirs(OUT, exist_ok=True)
    onnx.save(model, os.path.join(OUT, "xgb_small.onnx"))
    np.savetxt(os.path.join(OUT, "xgb_covers.txt"), np.array(nodes["cover"]), fmt="%.9g")
    np.savetxt(os.path.join(OUT, "xgb_x.txt"), xt, fmt="%.9g")
    np.savetxt(os.path.join(OUT, "xgb_contribs.txt"), contribs, fmt="%.9g")
    np.savetxt(os.path.join(OUT, "xgb_margin.txt"), margin, fmt="%.9g")
    print(f"wrote {OUT}: {len(trees)} trees, {len(nodes['modes'])} nodes, {len(xt)} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
