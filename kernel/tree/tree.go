package tree

// Domain is the ONNX-ML operator domain.
const Domain = "ai.onnx.ml"
