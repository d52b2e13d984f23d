// RUN: sparse-mlir-opt %s -split-input-file -verify-diagnostics

func.func @two_blocks() {
  // expected-error@+1 {{'smlir.kernel' op expects region #0 to have 0 or 1 blocks}}
  "smlir.kernel"() <{name = "k"}> ({
    cf.br ^bb1
  ^bb1:
    cf.br ^bb1
  }) : () -> ()
  return
}
