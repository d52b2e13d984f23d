// RUN: sparse-mlir-opt %s -smlir-lower-sampled-matmul="lanes=8 entries=8" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: not sparse-mlir-opt %s -smlir-lower-sampled-matmul="lanes=7" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: not sparse-mlir-opt %s -smlir-lower-sampled-matmul="tile-tokens=12" -split-input-file 2>&1 | FileCheck %s --check-prefix=OPTIONS
// OPTIONS: error: smlir-lower-sampled-matmul: lanes must be 4, 8, 16 or 32, entries 1 to 16 and tile-tokens a multiple of 8 and of the lanes
// RUN: not sparse-mlir-opt %s -smlir-lower-sampled-matmul="entries=x" -split-input-file 2>&1 | FileCheck %s --check-prefix=UNPARSED
// UNPARSED: error: smlir-lower-sampled-matmul: option 'entries' expects an integer (int64), got 'x'

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A weight's gradient dW = dy^T x at a CSR W's positions, T dynamic: one
/// chunk of rows for 32 rows (an scf.parallel of 1), whose tiles of T (512
/// KB / (4 * 64) bytes -> the 512-token cap) pack x and dy feature-major
/// through 8 x 8 register transposes, then its rows take 8 entries at a
/// time with 8 accumulators, their sums added to the values in one vector.
// CHECK-LABEL: func.func @weight_gradient_csr(
// CHECK-SAME:      %[[DY:.*]]: tensor<?x32xf32>, %[[X:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<32x64xf32, #{{.*}}>)
// CHECK-NOT:     smlir.sampled_matmul
// CHECK-DAG:     %[[DYB:.*]] = bufferization.to_buffer %[[DY]] read_only : tensor<?x32xf32> to memref<?x32xf32>
// CHECK-DAG:     %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<?x64xf32> to memref<?x64xf32>
// CHECK-DAG:     %[[POS:.*]] = sparse_tensor.positions %[[W]] {level = 1 : index}
// CHECK-DAG:     %[[CRD:.*]] = sparse_tensor.coordinates %[[W]] {level = 1 : index}
/// The stored count is positions[32].
// CHECK:         %[[NNZ:.*]] = memref.load %[[POS]][%c32]
// CHECK:         %[[OUT:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xf32>
// CHECK:         %[[AT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x32x512xf32>
// CHECK:         %[[BT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x64x512xf32>
// CHECK:         smlir.kernel "sampled_matmul_csr_tn_32x64"
/// T = 0: zeros.
// CHECK:           scf.if
// CHECK:           scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%c1{{.*}})
// CHECK:             scf.for %[[T0:.*]] = %{{.*}} to %{{.*}} step %c512
// CHECK-COUNT-8:         vector.load %[[XB]]{{.*}} : memref<?x64xf32>, vector<8xf32>
// CHECK-COUNT-24:        vector.shuffle
// CHECK:                 vector.store {{.*}}, %[[BT]][%[[C]], {{.*}}] : memref<1x64x512xf32>, vector<8xf32>
// CHECK-COUNT-8:         vector.load %[[DYB]]{{.*}} : memref<?x32xf32>, vector<8xf32>
// CHECK-COUNT-24:        vector.shuffle
// CHECK:                 vector.store {{.*}}, %[[AT]][%[[C]], {{.*}}] : memref<1x32x512xf32>, vector<8xf32>
// CHECK:               memref.load %[[POS]]
// CHECK:               scf.for
// CHECK-COUNT-8:         memref.load %[[CRD]]
// CHECK:                 scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK:                   vector.load %[[AT]]
// CHECK-COUNT-8:           vector.fma
// CHECK-COUNT-12:        vector.shuffle
// CHECK:                 vector.load %[[OUT]]{{.*}} : memref<?xf32>, vector<8xf32>
// CHECK:                 arith.select
// CHECK:                 vector.store {{.*}}, %[[OUT]]
/// The row's last entries one at a time.
// CHECK:               scf.for
// CHECK:                 scf.for {{.*}} -> (vector<8xf32>)
// CHECK:                 vector.reduction <add>
// CHECK:                 memref.store {{.*}}, %[[OUT]]
/// sparse_tensor.values of the result is the new buffer.
// CHECK:         %[[RES:.*]] = bufferization.to_tensor %[[OUT]]
// CHECK:         return %[[RES]]
func.func @weight_gradient_csr(%dy: tensor<?x32xf32>, %x: tensor<?x64xf32>, %w: tensor<32x64xf32, #CSR>) -> tensor<?xf32> {
  %dw = smlir.sampled_matmul %dy, %x, %w lhs <transposed> : tensor<?x32xf32>, tensor<?x64xf32>, tensor<32x64xf32, #CSR> -> tensor<32x64xf32, #CSR>
  %v = sparse_tensor.values %dw : tensor<32x64xf32, #CSR> to memref<?xf32>
  %r = bufferization.to_tensor %v restrict : memref<?xf32> to tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// An n:m pattern: rows are 64 / 4 * 2 = 32 entries long; an entry's column
/// is its group's first plus its in-group coordinate. Other uses of the
/// result than its values get the pattern's coordinates assembled with the
/// new values.
// CHECK-LABEL: func.func @nm_assembled(
// CHECK-SAME:      %{{.*}}: tensor<16x8xf32>, %{{.*}}: tensor<8x64xf32>, %[[S:.*]]: tensor<16x64xf32, #[[$NM:.*]]>)
// CHECK:         %[[CRD:.*]] = sparse_tensor.coordinates %[[S]] {level = 2 : index}
// CHECK:         smlir.kernel "sampled_matmul_2of4_nn_16x64"
// CHECK:           scf.parallel
// CHECK:             arith.muli %{{.*}}, %c32
// CHECK:             memref.load %[[CRD]]
// CHECK:             arith.divui
// CHECK-DAG:     %[[LVL:.*]] = bufferization.to_tensor %[[CRD]]
// CHECK-DAG:     %[[VALS:.*]] = bufferization.to_tensor %{{.*}} restrict
// CHECK:         %[[R:.*]] = sparse_tensor.assemble (%[[LVL]]), %[[VALS]] : (tensor<?xi8>), tensor<?xf32> to tensor<16x64xf32, #[[$NM]]>
// CHECK:         return %[[R]]
func.func @nm_assembled(%a: tensor<16x8xf32>, %b: tensor<8x64xf32>, %s: tensor<16x64xf32, #NM24>) -> tensor<16x64xf32, #NM24> {
  %r = smlir.sampled_matmul %a, %b, %s : tensor<16x8xf32>, tensor<8x64xf32>, tensor<16x64xf32, #NM24> -> tensor<16x64xf32, #NM24>
  return %r : tensor<16x64xf32, #NM24>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// `scaled` multiplies the sums by the pattern's values.
// CHECK-LABEL: func.func @scaled_scores(
// CHECK:         %[[VAL:.*]] = sparse_tensor.values
// CHECK:         smlir.kernel "sampled_matmul_csr_nt_scaled_16x16"
// CHECK:           vector.load %[[VAL]]
// CHECK:           arith.mulf
func.func @scaled_scores(%q: tensor<16x8xf32>, %k: tensor<16x8xf32>, %mask: tensor<16x16xf32, #CSR>) -> tensor<16x16xf32, #CSR> {
  %s = smlir.sampled_matmul %q, %k, %mask rhs <transposed> scaled : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x16xf32, #CSR> -> tensor<16x16xf32, #CSR>
  return %s : tensor<16x16xf32, #CSR>
}

// -----

#COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>

/// A COO pattern has no micro-kernel (and no other lowering): an error, no crash.
func.func @negative_coo(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %s: tensor<4x16xf32, #COO>) -> tensor<4x16xf32, #COO> {
  // expected-error@+1 {{'smlir.sampled_matmul' op has no CPU lowering for the pattern 'tensor<4x16xf32, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique), d1 : singleton) }>>': the pattern must be CSR or n:m (other formats have no lowering)}}
  %r = smlir.sampled_matmul %a, %b, %s : tensor<4x8xf32>, tensor<8x16xf32>, tensor<4x16xf32, #COO> -> tensor<4x16xf32, #COO>
  return %r : tensor<4x16xf32, #COO>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

func.func @negative_f64(%a: tensor<4x8xf64>, %b: tensor<8x16xf64>, %s: tensor<4x16xf64, #CSR>) -> tensor<4x16xf64, #CSR> {
  // expected-error@+1 {{has no CPU lowering for the pattern 'tensor<4x16xf64, #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>>': the kernel computes in f32}}
  %r = smlir.sampled_matmul %a, %b, %s : tensor<4x8xf64>, tensor<8x16xf64>, tensor<4x16xf64, #CSR> -> tensor<4x16xf64, #CSR>
  return %r : tensor<4x16xf64, #CSR>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// Rows sharing one pattern (the argument's #smlir.nm<..., rows = 4>): 4
/// rows x 2 entries per tile, each B' vector loaded once for the 4 rows'
/// FMAs; 10 rows = 2 groups of 4 and a last group of 2 rows, taken one
/// row at a time.
// CHECK-LABEL: func.func @shared_rows(
// CHECK:         smlir.kernel "sampled_matmul_2of4r4_tn_10x16"
// CHECK:           scf.parallel
/// The chunk's groups of rows.
// CHECK:               scf.for %[[U:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:                 scf.if
// CHECK:                   scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-COUNT-4:             vector.load %{{.*}} : memref<1x12x512xf32>, vector<8xf32>
// CHECK-NEXT:                %[[B:.*]] = vector.load %{{.*}} : memref<1x16x512xf32>, vector<8xf32>
// CHECK-NEXT:                vector.fma %{{.*}}, %[[B]]
// CHECK-NEXT:                vector.fma %{{.*}}, %[[B]]
// CHECK-NEXT:                vector.fma %{{.*}}, %[[B]]
// CHECK-NEXT:                vector.fma %{{.*}}, %[[B]]
// CHECK-COUNT-4:           vector.store {{.*}} : memref<?xf32>, vector<2xf32>
/// The rows of the last group, one at a time.
// CHECK:                 } else {
// CHECK:                   scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
func.func @shared_rows(%dy: tensor<?x10xf32>, %x: tensor<?x16xf32>, %w: tensor<10x16xf32, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4, rows = 4>}) -> tensor<?xf32> {
  %dw = smlir.sampled_matmul %dy, %x, %w lhs <transposed> : tensor<?x10xf32>, tensor<?x16xf32>, tensor<10x16xf32, #NM24> -> tensor<10x16xf32, #NM24>
  %v = sparse_tensor.values %dw : tensor<10x16xf32, #NM24> to memref<?xf32>
  %r = bufferization.to_tensor %v restrict : memref<?xf32> to tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed) }>

/// An empty pattern (0 rows) still lowers: one chunk of no rows.
// CHECK-LABEL: func.func @empty_pattern(
// CHECK:         smlir.kernel "sampled_matmul_csr_tn_0x16"
// CHECK-NOT:     smlir.sampled_matmul
func.func @empty_pattern(%dy: tensor<?x0xf32>, %x: tensor<?x16xf32>, %w: tensor<0x16xf32, #CSR>) -> tensor<0x16xf32, #CSR> {
  %dw = smlir.sampled_matmul %dy, %x, %w lhs <transposed> : tensor<?x0xf32>, tensor<?x16xf32>, tensor<0x16xf32, #CSR> -> tensor<0x16xf32, #CSR>
  return %dw : tensor<0x16xf32, #CSR>
}
