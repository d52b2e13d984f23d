// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// #smlir.hybrid (composable formats) survives parse -> print -> parse with
// its parts printed in full and the threshold in its shortest spelling.

/// The BSR + CSR split of a linear weight, as Python's sm.Hybrid spells it.
// CHECK-LABEL: func.func @hybrid_bsr_csr_round_trips(
// CHECK-SAME:      %{{.*}}: tensor<64x32xf32> {smlir.encoding = #smlir.hybrid<[#smlir.bsr<block = [4, 4]>, #smlir.csr], threshold = 0.5>})
func.func @hybrid_bsr_csr_round_trips(%w: tensor<64x32xf32> {smlir.encoding = #smlir.hybrid<[#smlir.bsr<block = [4, 4]>, #smlir.csr], threshold = 0.5>}) {
  return
}

// -----

/// Parts keep their own parameters (widths, block), which print when not the default.
// CHECK-LABEL: func.func @hybrid_parts_keep_parameters(
// CHECK-SAME:      #smlir.hybrid<[#smlir.bsr<block = [8, 4], crdWidth = 16>, #smlir.csr<posWidth = 64>], threshold = 0.75>
func.func @hybrid_parts_keep_parameters(%w: tensor<64x32xf32> {smlir.encoding = #smlir.hybrid<[#smlir.bsr<block = [8, 4], crdWidth = 16>, #smlir.csr<posWidth = 64>], threshold = 0.75>}) {
  return
}
