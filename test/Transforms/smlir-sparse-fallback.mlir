// RUN: sparse-mlir-opt %s -smlir-sparse-fallback -split-input-file -verify-diagnostics | FileCheck %s
// RUN: sparse-mlir-opt %s -smlir-sparse-fallback -split-input-file -verify-diagnostics -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// A sparse argument stays sparse only when every reader has a sparse
// lowering (an `smlir.linear` reading it as its weight, a matmul with the
// sparse operand on the left and a dense right-hand side, a sparse_tensor op,
// func.return).
// Otherwise the argument gets its dense type back and is marked
// `#smlir.storage<dense, reason = ...>` (arguments kept sparse get
// `#smlir.storage<sparse>`), and each (op, format) is reported once as a warning.
// The arguments carry the attributes smlir-hoist-argument-sparsifiers leaves.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#ID = affine_map<(d0, d1) -> (d0, d1)>

/// A generic the sparsifier was not built for reads the weight: the warning
/// names the op, the tensor and the format; the argument becomes dense and
/// keeps its attributes, plus its #smlir.storage decision; the generic reads it as is.
// CHECK-DAG:   #[[$ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @generic_reader_falls_back(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32> {smlir.encoding = #smlir.csr, smlir.sparsifier = #smlir.scalar_fraction<0.9>, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "proj.weight", smlir.weight},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ID]], #[[$ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:        ins(%[[W]], %[[X]] : tensor<8x8xf32>, tensor<8x8xf32>) outs(%[[E]] : tensor<8x8xf32>) {
// CHECK:         return %[[R]] : tensor<8x8xf32>
/// The function type changes with the entry block.
// GENERIC:     function_type = (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>, sym_name = "generic_reader_falls_back"
func.func @generic_reader_falls_back(%w: tensor<8x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.sparsifier = #smlir.scalar_fraction<0.9>, smlir.tensor_name = "proj.weight", smlir.weight}, %x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = tensor.empty() : tensor<8x8xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.generic' reading tensor 'proj.weight' stored as csr; computing it densely}}
  %r = linalg.generic {indexing_maps = [#ID, #ID, #ID], iterator_types = ["parallel", "parallel"]} ins(%w, %x : tensor<8x8xf32, #CSR>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A transpose of a sparse W into a dense init (the F.linear form left when
/// smlir-raise-linear does not apply) crashes upstream's
/// sparsifier: read densely instead.
// CHECK-LABEL: func.func @transpose_falls_back(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "fc.weight"})
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf32>) outs(%[[E]] : tensor<8x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    return %[[T]] : tensor<8x16xf32>
// GENERIC:     function_type = (tensor<16x8xf32>) -> tensor<8x16xf32>, sym_name = "transpose_falls_back"
func.func @transpose_falls_back(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc.weight"}) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc.weight' stored as csr; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  return %t : tensor<8x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// smlir.linear reading a sparse weight (what smlir-raise-linear builds):
/// no warning, the argument stays sparse.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @negative_linear_sparse_weight(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<sparse>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>)
// CHECK-NEXT:    %[[R:.*]] = smlir.linear %[[X]], %[[W]] : tensor<3x8xf32>, tensor<16x8xf32, #[[$CSR]]> -> tensor<3x16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<3x16xf32>
// GENERIC:     function_type = (tensor<16x8xf32, #{{[a-z0-9_]+}}>, tensor<3x8xf32>) -> tensor<3x16xf32>, sym_name = "negative_linear_sparse_weight"
func.func @negative_linear_sparse_weight(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc.weight"}, %x: tensor<3x8xf32>) -> tensor<3x16xf32> {
  %r = smlir.linear %x, %w : tensor<3x8xf32>, tensor<16x8xf32, #CSR> -> tensor<3x16xf32>
  return %r : tensor<3x16xf32>
}

/// W * x with W on the left and a dense x: supported, stays sparse.
// CHECK-LABEL: func.func @negative_matmul_sparse_lhs(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<sparse>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x3xf32>, %[[B:[^:]*]]: tensor<16x3xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul ins(%[[W]], %[[X]] : tensor<16x8xf32, #[[$CSR]]>, tensor<8x3xf32>) outs(%[[B]] : tensor<16x3xf32>)
// CHECK-NEXT:    return %[[R]]
// GENERIC:     function_type = (tensor<16x8xf32, #{{[a-z0-9_]+}}>, tensor<8x3xf32>, tensor<16x3xf32>) -> tensor<16x3xf32>, sym_name = "negative_matmul_sparse_lhs"
func.func @negative_matmul_sparse_lhs(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc.weight"}, %x: tensor<8x3xf32>, %b: tensor<16x3xf32>) -> tensor<16x3xf32> {
  %r = linalg.matmul ins(%w, %x : tensor<16x8xf32, #CSR>, tensor<8x3xf32>) outs(%b : tensor<16x3xf32>) -> tensor<16x3xf32>
  return %r : tensor<16x3xf32>
}

/// sparse_tensor ops read sparse tensors by definition, and returning the
/// argument needs no lowering: stays sparse.
// CHECK-LABEL: func.func @negative_convert_and_return(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<sparse>, smlir.tensor_name = "fc.weight"})
// CHECK-SAME:      -> (tensor<16x8xf32>, tensor<16x8xf32, #[[$CSR]]>)
// CHECK-NEXT:    %[[D:.*]] = sparse_tensor.convert %[[W]] : tensor<16x8xf32, #[[$CSR]]> to tensor<16x8xf32>
// CHECK-NEXT:    return %[[D]], %[[W]] : tensor<16x8xf32>, tensor<16x8xf32, #[[$CSR]]>
// GENERIC:     function_type = (tensor<16x8xf32, #{{[a-z0-9_]+}}>) -> (tensor<16x8xf32>, tensor<16x8xf32, #{{[a-z0-9_]+}}>), sym_name = "negative_convert_and_return"
func.func @negative_convert_and_return(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc.weight"}) -> (tensor<16x8xf32>, tensor<16x8xf32, #CSR>) {
  %d = sparse_tensor.convert %w : tensor<16x8xf32, #CSR> to tensor<16x8xf32>
  return %d, %w : tensor<16x8xf32>, tensor<16x8xf32, #CSR>
}

/// Dense arguments are not looked at, whatever reads them.
// CHECK-LABEL: func.func @negative_dense_argument(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<16x8xf32>) -> tensor<8x16xf32> {
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT:    linalg.transpose ins(%[[X]] : tensor<16x8xf32>)
func.func @negative_dense_argument(%x: tensor<16x8xf32>) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %t = linalg.transpose ins(%x : tensor<16x8xf32>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  return %t : tensor<8x16xf32>
}

/// A declaration has no readers to look at: unchanged (and no crash).
// CHECK-LABEL: func.func private @negative_declaration(
// CHECK-SAME:      tensor<16x8xf32, #[[$CSR]]>)
func.func private @negative_declaration(tensor<16x8xf32, #CSR>)

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// x * W with the sparse W on the right is not a supported matmul: fallback.
// CHECK-LABEL: func.func @matmul_sparse_rhs_falls_back(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<3x8xf32>,
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x16xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[B:[^:]*]]: tensor<3x16xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<3x8xf32>, tensor<8x16xf32>) outs(%[[B]] : tensor<3x16xf32>)
// CHECK-NEXT:    return %[[R]]
// GENERIC:     function_type = (tensor<3x8xf32>, tensor<8x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>, sym_name = "matmul_sparse_rhs_falls_back"
func.func @matmul_sparse_rhs_falls_back(%x: tensor<3x8xf32>, %w: tensor<8x16xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc.weight"}, %b: tensor<3x16xf32>) -> tensor<3x16xf32> {
  // expected-warning @below {{no sparse lowering for 'linalg.matmul' reading tensor 'fc.weight' stored as csr; computing it densely}}
  %r = linalg.matmul ins(%x, %w : tensor<3x8xf32>, tensor<8x16xf32, #CSR>) outs(%b : tensor<3x16xf32>) -> tensor<3x16xf32>
  return %r : tensor<3x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// W on the left of a matmul whose right-hand side is sparse too (a sparse
/// activation here) is not supported either.
// CHECK-LABEL: func.func @matmul_sparse_lhs_and_rhs_falls_back(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x3xf32>,
// CHECK-SAME:      %[[B:[^:]*]]: tensor<16x3xf32>)
// CHECK-NEXT:    %[[XS:.*]] = sparse_tensor.convert %[[X]] : tensor<8x3xf32> to tensor<8x3xf32, #{{.*}}>
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul ins(%[[W]], %[[XS]] : tensor<16x8xf32>, tensor<8x3xf32, #{{.*}}>) outs(%[[B]] : tensor<16x3xf32>)
func.func @matmul_sparse_lhs_and_rhs_falls_back(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc.weight"}, %x: tensor<8x3xf32>, %b: tensor<16x3xf32>) -> tensor<16x3xf32> {
  %xs = sparse_tensor.convert %x : tensor<8x3xf32> to tensor<8x3xf32, #CSR>
  // expected-warning @below {{no sparse lowering for 'linalg.matmul' reading tensor 'fc.weight' stored as csr; computing it densely}}
  %r = linalg.matmul ins(%w, %xs : tensor<16x8xf32, #CSR>, tensor<8x3xf32, #CSR>) outs(%b : tensor<16x3xf32>) -> tensor<16x3xf32>
  return %r : tensor<16x3xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// One unsupported reader is enough: the argument falls back (a weight is
/// passed once, in one form); the supported matmul keeps its sparse lowering
/// through one convert of the dense argument. Only the unsupported reader is
/// reported.
// CHECK-LABEL: func.func @mixed_readers_fall_back(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "fc.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x3xf32>, %[[B:[^:]*]]: tensor<16x3xf32>)
// CHECK-NEXT:    %[[S:.*]] = sparse_tensor.convert %[[W]] : tensor<16x8xf32> to tensor<16x8xf32, #{{.*}}>
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul ins(%[[S]], %[[X]] : tensor<16x8xf32, #{{.*}}>, tensor<8x3xf32>) outs(%[[B]] : tensor<16x3xf32>)
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT:    %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf32>) outs(%[[E]] : tensor<8x16xf32>) permutation = [1, 0]
// CHECK-NEXT:    return %[[R]], %[[T]] : tensor<16x3xf32>, tensor<8x16xf32>
// GENERIC:     function_type = (tensor<16x8xf32>, tensor<8x3xf32>, tensor<16x3xf32>) -> (tensor<16x3xf32>, tensor<8x16xf32>), sym_name = "mixed_readers_fall_back"
func.func @mixed_readers_fall_back(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc.weight"}, %x: tensor<8x3xf32>, %b: tensor<16x3xf32>) -> (tensor<16x3xf32>, tensor<8x16xf32>) {
  %r = linalg.matmul ins(%w, %x : tensor<16x8xf32, #CSR>, tensor<8x3xf32>) outs(%b : tensor<16x3xf32>) -> tensor<16x3xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc.weight' stored as csr; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  return %r, %t : tensor<16x3xf32>, tensor<8x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// One warning per (op, format): only one of the two transposes is reported
/// (-verify-diagnostics rejects an unexpected warning); the add, another op,
/// is reported too. Every reader reads the dense argument. The warning is on
/// the first reader in program order, %t1.
// CHECK-LABEL: func.func @one_warning_per_op_and_format(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "fc.weight"})
// CHECK:         %[[T1:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf32>)
// CHECK-NEXT:    %[[T2:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8xf32>)
// CHECK:         %[[A:.*]] = linalg.add ins(%[[W]], %[[W]] : tensor<16x8xf32>, tensor<16x8xf32>)
// CHECK-NEXT:    return %[[T1]], %[[T2]], %[[A]]
func.func @one_warning_per_op_and_format(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc.weight"}) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x8xf32>) {
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc.weight' stored as csr; computing it densely}}
  %t1 = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %t2 = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<16x8xf32>
  // Both operands are the weight: still one warning for this op.
  // expected-warning @below {{no sparse lowering for 'linalg.add' reading tensor 'fc.weight' stored as csr; computing it densely}}
  %a = linalg.add ins(%w, %w : tensor<16x8xf32, #CSR>, tensor<16x8xf32, #CSR>) outs(%e2 : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %t1, %t2, %a : tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x8xf32>
}

// -----

#NM24 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 4 : dense, d1 mod 4 : structured[2, 4]), crdWidth = 8 }>

/// The n:m format is named n:m, here "2:4".
// CHECK-LABEL: func.func @nm_format_name(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "fc.weight"})
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT:    linalg.transpose ins(%[[W]] : tensor<16x8xf32>)
func.func @nm_format_name(%w: tensor<16x8xf32, #NM24> {smlir.encoding = #smlir.nm<n = 2, m = 4>, smlir.tensor_name = "fc.weight"}) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc.weight' stored as 2:4; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #NM24>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  return %t : tensor<8x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Without smlir.tensor_name the tensor is called '<argument>'.
// CHECK-LABEL: func.func @no_tensor_name(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = "read by 'linalg.transpose' (no sparse lowering for csr)">})
func.func @no_tensor_name(%w: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr}) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor '<argument>' stored as csr; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  return %t : tensor<8x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A sparse argument not made by the hoist pass (no attributes at all): the
/// format is only known to be "sparse", and its #smlir.storage decision is its only
/// attribute.
// CHECK-LABEL: func.func @no_argument_attributes(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<16x8xf32> {smlir.storage = #smlir.storage<dense, reason = {{.*}}>})
func.func @no_argument_attributes(%w: tensor<16x8xf32, #CSR>) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor '<argument>' stored as sparse; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  return %t : tensor<8x16xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Each argument is decided on its own: the weight read by a transpose falls
/// back, the one read by a supported matmul stays sparse, in argument order.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @arguments_decided_one_by_one(
// CHECK-SAME:      %[[W1:[^:]*]]: tensor<16x8xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "fc1.weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x3xf32>,
// CHECK-SAME:      %[[W2:[^:]*]]: tensor<16x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<sparse>, smlir.tensor_name = "fc2.weight"},
// CHECK-SAME:      %[[B:[^:]*]]: tensor<16x3xf32>)
// CHECK:         linalg.transpose ins(%[[W1]] : tensor<16x8xf32>)
// CHECK-NEXT:    linalg.matmul ins(%[[W2]], %[[X]] : tensor<16x8xf32, #[[$CSR]]>, tensor<8x3xf32>)
// GENERIC:     function_type = (tensor<16x8xf32>, tensor<8x3xf32>, tensor<16x8xf32, #{{[a-z0-9_]+}}>, tensor<16x3xf32>) -> (tensor<8x16xf32>, tensor<16x3xf32>), sym_name = "arguments_decided_one_by_one"
func.func @arguments_decided_one_by_one(%w1: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc1.weight"}, %x: tensor<8x3xf32>, %w2: tensor<16x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "fc2.weight"}, %b: tensor<16x3xf32>) -> (tensor<8x16xf32>, tensor<16x3xf32>) {
  %e = tensor.empty() : tensor<8x16xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'fc1.weight' stored as csr; computing it densely}}
  %t = linalg.transpose ins(%w1 : tensor<16x8xf32, #CSR>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %r = linalg.matmul ins(%w2, %x : tensor<16x8xf32, #CSR>, tensor<8x3xf32>) outs(%b : tensor<16x3xf32>) -> tensor<16x3xf32>
  return %t, %r : tensor<8x16xf32>, tensor<16x3xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A reader that needs the sparse type (here: the return) still gets it, from
/// one convert of the dense argument, so the function stays valid.
// CHECK-LABEL: func.func @sparse_typed_reader_gets_a_convert(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32> {smlir.storage = #smlir.storage<dense, reason = {{.*}}>})
// CHECK-NEXT:    %[[S:.*]] = sparse_tensor.convert %[[W]] : tensor<8x8xf32> to tensor<8x8xf32, #{{.*}}>
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[W]] : tensor<8x8xf32>)
// CHECK-NEXT:    return %[[S]], %[[T]]
func.func @sparse_typed_reader_gets_a_convert(%w: tensor<8x8xf32, #CSR>) -> (tensor<8x8xf32, #CSR>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor '<argument>' stored as sparse; computing it densely}}
  %t = linalg.transpose ins(%w : tensor<8x8xf32, #CSR>) outs(%e : tensor<8x8xf32>) permutation = [1, 0]
  return %w, %t : tensor<8x8xf32, #CSR>, tensor<8x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Deduplication is per tensor too: two weights read by the same kind of op
/// are both named.
// CHECK-LABEL: func.func @each_tensor_is_named(
// CHECK-SAME:      tensor<8x8xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "a"}
// CHECK-SAME:      tensor<8x8xf32> {smlir.encoding = #smlir.csr, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "b"}
func.func @each_tensor_is_named(%a: tensor<8x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "a"}, %b: tensor<8x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "b"}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'a' stored as csr; computing it densely}}
  %ta = linalg.transpose ins(%a : tensor<8x8xf32, #CSR>) outs(%e : tensor<8x8xf32>) permutation = [1, 0]
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'b' stored as csr; computing it densely}}
  %tb = linalg.transpose ins(%b : tensor<8x8xf32, #CSR>) outs(%e : tensor<8x8xf32>) permutation = [1, 0]
  return %ta, %tb : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A sparse intermediate read by an op without a sparse lowering: that reader
/// gets one convert back to dense, placed right after the sparsifier; the
/// return (which can take the sparse value) keeps it.
// CHECK-LABEL: func.func @sparse_intermediate_reader_reads_dense(
// CHECK:         %[[S:.*]] = smlir.sparsify
// CHECK-NEXT:    %[[D:.*]] = sparse_tensor.convert %[[S]] : tensor<8x8xf32, #{{.*}}> to tensor<8x8xf32>
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[D]] : tensor<8x8xf32>)
// CHECK:         return %[[S]], %[[T]]
func.func @sparse_intermediate_reader_reads_dense(%x: tensor<8x8xf32>) -> (tensor<8x8xf32, #CSR>, tensor<8x8xf32>) {
  %s = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.5> as #smlir.csr {tensor_name = "gelu"} -> tensor<8x8xf32, #CSR>
  %e = tensor.empty() : tensor<8x8xf32>
  // expected-warning @below {{no sparse lowering for 'linalg.transpose' reading tensor 'gelu' stored as csr; computing it densely}}
  %t = linalg.transpose ins(%s : tensor<8x8xf32, #CSR>) outs(%e : tensor<8x8xf32>) permutation = [1, 0]
  return %s, %t : tensor<8x8xf32, #CSR>, tensor<8x8xf32>
}

// -----

/// Operands whose type must stay (a call's, a region terminator's) keep the
/// sparse value: a dense one there was invalid IR. No fallback, no warning.
#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @passed_on_sparse(
// CHECK-SAME:    %[[W:.*]]: tensor<8x8xf32, #sparse>
// CHECK:         call @consume(%[[W]]) : (tensor<8x8xf32, #sparse>) -> ()
// CHECK:         scf.yield %{{.*}} : tensor<8x8xf32, #sparse>
func.func private @consume(tensor<8x8xf32, #CSR>)
func.func @passed_on_sparse(%w: tensor<8x8xf32, #CSR>, %c: i1, %x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  call @consume(%w) : (tensor<8x8xf32, #CSR>) -> ()
  %r = scf.if %c -> tensor<8x8xf32, #CSR> {
    %s = smlir.sparsify %x : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.csr -> tensor<8x8xf32, #CSR>
    scf.yield %s : tensor<8x8xf32, #CSR>
  } else {
    scf.yield %w : tensor<8x8xf32, #CSR>
  }
  return %r : tensor<8x8xf32, #CSR>
}

// -----

/// An n:m weight with one group per row (K == m) and elements other than
/// f32: upstream sparsification cannot read it (its group level folds to 0:
/// "invalid indexing maps are non-invertible"), and the f32 micro-kernels
/// do not take it, so even an smlir.linear reads it densely.
#NM48 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 8 : dense, d1 mod 8 : structured[4, 8]), crdWidth = 8 }>
// CHECK-LABEL: func.func @nm_single_group_f64(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<32x8xf64> {smlir.encoding = #smlir.nm<n = 4, m = 8>, smlir.storage = #smlir.storage<dense, reason = {{.*}}>, smlir.tensor_name = "weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x8xf64>)
// CHECK-NEXT:    %[[R:.*]] = smlir.linear %[[X]], %[[W]] : tensor<4x8xf64>, tensor<32x8xf64> -> tensor<4x32xf64>
// CHECK-NEXT:    return %[[R]] : tensor<4x32xf64>
func.func @nm_single_group_f64(%w: tensor<32x8xf64, #NM48> {smlir.encoding = #smlir.nm<n = 4, m = 8>, smlir.tensor_name = "weight"}, %x: tensor<4x8xf64>) -> tensor<4x32xf64> {
  // expected-warning @below {{no sparse lowering for 'smlir.linear' reading tensor 'weight' stored as 4:8; computing it densely}}
  %r = smlir.linear %x, %w : tensor<4x8xf64>, tensor<32x8xf64, #NM48> -> tensor<4x32xf64>
  return %r : tensor<4x32xf64>
}

// -----

/// The same weight in f32 is left sparse: the micro-kernels read it.
#NM48 = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 floordiv 8 : dense, d1 mod 8 : structured[4, 8]), crdWidth = 8 }>
// CHECK-LABEL: func.func @nm_single_group_f32(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<32x8xf32, #[[$NM:[^>]*]]> {smlir.encoding = #smlir.nm<n = 4, m = 8>, smlir.storage = #smlir.storage<sparse>, smlir.tensor_name = "weight"},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[R:.*]] = smlir.linear %[[X]], %[[W]] : tensor<4x8xf32>, tensor<32x8xf32, #[[$NM]]> -> tensor<4x32xf32>
// CHECK-NEXT:    return %[[R]] : tensor<4x32xf32>
func.func @nm_single_group_f32(%w: tensor<32x8xf32, #NM48> {smlir.encoding = #smlir.nm<n = 4, m = 8>, smlir.tensor_name = "weight"}, %x: tensor<4x8xf32>) -> tensor<4x32xf32> {
  %r = smlir.linear %x, %w : tensor<4x8xf32>, tensor<32x8xf32, #NM48> -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}
