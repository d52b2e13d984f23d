"""Front ends that turn a framework model into linalg-on-tensors MLIR text."""
