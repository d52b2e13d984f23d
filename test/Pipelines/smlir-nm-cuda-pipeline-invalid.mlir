// RUN: not sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-nm-cuda-pipeline{chip=sm_75})' 2>&1 | FileCheck %s
// RUN: not sparse-mlir-opt %s --pass-pipeline='builtin.module(smlir-nm-cuda-pipeline{chip=bogus})' 2>&1 | FileCheck %s --check-prefix=BOGUS

// A chip without sparse tensor cores (or unknown to LLVM) is an error of the
// pipeline's options, not a fatal error in the NVPTX backend.

// CHECK: error: smlir-nm-cuda-pipeline: chip 'sm_75' has no sparse tensor cores LLVM can target
// BOGUS: error: smlir-nm-cuda-pipeline: chip 'bogus' has no sparse tensor cores LLVM can target
module {}
