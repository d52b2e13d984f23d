// RUN: sparse-mlir-opt %s -split-input-file | sparse-mlir-opt -split-input-file | FileCheck %s

// #smlir.ell (fixed-width rows) survives parse -> print -> parse, alone and
// as the first part of a hybrid with a coo remainder.

/// A width the user gave prints as given; crdWidth only when not 32.
// CHECK-LABEL: func.func @ell_width_round_trips(
// CHECK-SAME:      %{{.*}}: tensor<64x32xf32> {smlir.encoding = #smlir.ell<width = 4>}
// CHECK-SAME:      %{{.*}}: tensor<64x32xf32> {smlir.encoding = #smlir.ell<width = 2, crdWidth = 16>})
func.func @ell_width_round_trips(%a: tensor<64x32xf32> {smlir.encoding = #smlir.ell<width = 4>},
                                 %b: tensor<64x32xf32> {smlir.encoding = #smlir.ell<width = 2, crdWidth = 16>}) {
  return
}

// -----

/// Width left out (picked from the weight when stored): no parameters print.
// CHECK-LABEL: func.func @ell_width_left_out(
// CHECK-SAME:      %{{.*}}: tensor<64x32xf32> {smlir.encoding = #smlir.ell})
func.func @ell_width_left_out(%a: tensor<64x32xf32> {smlir.encoding = #smlir.ell}) {
  return
}

// -----

/// ELL + COO, as Python's sm.Hybrid(sm.ELL(width=4), sm.COO()) spells it.
// CHECK-LABEL: func.func @hybrid_ell_coo_round_trips(
// CHECK-SAME:      #smlir.hybrid<[#smlir.ell<width = 4>, #smlir.coo], threshold = 0.5>
func.func @hybrid_ell_coo_round_trips(%w: tensor<64x32xf32> {smlir.encoding = #smlir.hybrid<[#smlir.ell<width = 4>, #smlir.coo], threshold = 0.5>}) {
  return
}

// -----

/// A csr remainder is as valid as coo (both row-addressable).
// CHECK-LABEL: func.func @hybrid_ell_csr_round_trips(
// CHECK-SAME:      #smlir.hybrid<[#smlir.ell, #smlir.csr<posWidth = 64>], threshold = 0.5>
func.func @hybrid_ell_csr_round_trips(%w: tensor<64x32xf32> {smlir.encoding = #smlir.hybrid<[#smlir.ell, #smlir.csr<posWidth = 64>], threshold = 0.5>}) {
  return
}
