"""Running target="cuda" code without MLIR: the CUDA driver (`driver`),
host programs (`host`), PTX launches on torch CUDA tensors (`launch`), the
graph executor (`graph`) and the 2:4 tensor-core weight layout (`nm24`)."""
