// RUN: sparse-mlir-opt %s -smlir-hoist-argument-sparsifiers -split-input-file | FileCheck %s
// RUN: sparse-mlir-opt %s -smlir-hoist-argument-sparsifiers -split-input-file -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// The only sparsifier of a `{smlir.weight}` argument of a public function
// moves to the caller: the argument takes the sparse type and records the
// sparsifier, the encoding and the tensor name as argument attributes.

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// The weight arrives already sparse: the op is gone and its users read the
/// argument. The activation next to it is untouched.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @weight_becomes_sparse_argument(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x8xf32>,
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.sparsifier = #smlir.scalar_fraction<0.9>, smlir.tensor_name = "fc.weight", smlir.weight})
// CHECK-SAME:      -> (tensor<8x8xf32, #[[$CSR]]>, tensor<4x8xf32>)
// CHECK-NEXT:    return %[[W]], %[[X]] : tensor<8x8xf32, #[[$CSR]]>, tensor<4x8xf32>
/// The function type itself changes, not only the entry block.
// GENERIC:     function_type = (tensor<4x8xf32>, tensor<8x8xf32, #{{[a-z0-9_]+}}>) -> (tensor<8x8xf32, #{{[a-z0-9_]+}}>, tensor<4x8xf32>), sym_name = "weight_becomes_sparse_argument"
func.func @weight_becomes_sparse_argument(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {smlir.weight}) -> (tensor<8x8xf32, #CSR>, tensor<4x8xf32>) {
  %s = smlir.sparsify %w : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr {tensor_name = "fc.weight"} -> tensor<8x8xf32, #CSR>
  return %s, %x : tensor<8x8xf32, #CSR>, tensor<4x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Other readers of the weight (an add and a return) read one convert back to
/// dense, made at the entry, so they now see the caller-pruned values; the
/// sparse user reads the argument. Without a tensor_name there is no
/// smlir.tensor_name attribute.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @dense_uses_read_a_convert(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.sparsifier = #smlir.scalar_fraction<0.9>, smlir.weight})
// CHECK-NEXT:    %[[D:.*]] = sparse_tensor.convert %[[W]] : tensor<8x8xf32, #[[$CSR]]> to tensor<8x8xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK-NEXT:    %[[SUM:.*]] = linalg.add ins(%[[D]], %[[D]] : tensor<8x8xf32>, tensor<8x8xf32>) outs(%[[E]] : tensor<8x8xf32>)
// CHECK-NEXT:    return %[[W]], %[[SUM]], %[[D]] : tensor<8x8xf32, #[[$CSR]]>, tensor<8x8xf32>, tensor<8x8xf32>
func.func @dense_uses_read_a_convert(%w: tensor<8x8xf32> {smlir.weight}) -> (tensor<8x8xf32, #CSR>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %a = linalg.add ins(%w, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = smlir.sparsify %w : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %s, %a, %w : tensor<8x8xf32, #CSR>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

/// Dense storage: the argument type does not change, so the other reader
/// needs no convert; the sparsifier and encoding are still recorded and the
/// op is gone.
// CHECK-LABEL: func.func @dense_encoding_keeps_type(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32> {smlir.encoding = #smlir.dense, smlir.sparsifier = #smlir.threshold<0.05>, smlir.weight})
// CHECK-SAME:      -> (tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK-NEXT:    return %[[W]], %[[W]] : tensor<8x8xf32>, tensor<8x8xf32>
func.func @dense_encoding_keeps_type(%w: tensor<8x8xf32> {smlir.weight}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %s = smlir.sparsify %w : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.dense -> tensor<8x8xf32>
  return %s, %w : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#BSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>

/// Every weight is hoisted on its own; arguments keep their order. A weight
/// with no sparsifier (the bias) keeps its type and gains no attribute.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-DAG:   #[[$BSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 floordiv 4 : compressed, d0 mod 2 : dense, d1 mod 4 : dense), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @two_weights_hoisted_in_order(
// CHECK-SAME:      %[[W1:[^:]*]]: tensor<8x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.sparsifier = #smlir.scalar_fraction<0.9>, smlir.tensor_name = "fc1.weight", smlir.weight},
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x8xf32>,
// CHECK-SAME:      %[[B:[^:]*]]: tensor<8xf32> {smlir.weight},
// CHECK-SAME:      %[[W2:[^:]*]]: tensor<8x16xf32, #[[$BSR]]> {smlir.encoding = #smlir.bsr<block = [2, 4]>, smlir.sparsifier = #smlir.block_fraction<fraction = 0.5, block = [2, 4]>, smlir.tensor_name = "fc2.weight", smlir.weight})
// CHECK-NEXT:    return %[[W1]], %[[X]], %[[B]], %[[W2]] :
// GENERIC:     function_type = (tensor<8x8xf32, #{{[a-z0-9_]+}}>, tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32, #{{[a-z0-9_]+}}>) -> {{.*}}, sym_name = "two_weights_hoisted_in_order"
func.func @two_weights_hoisted_in_order(%w1: tensor<8x8xf32> {smlir.weight}, %x: tensor<4x8xf32>, %b: tensor<8xf32> {smlir.weight}, %w2: tensor<8x16xf32> {smlir.weight}) -> (tensor<8x8xf32, #CSR>, tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32, #BSR>) {
  %s2 = smlir.sparsify %w2 : tensor<8x16xf32> with #smlir.block_fraction<fraction = 0.5, block = [2, 4]> as #smlir.bsr<block = [2, 4]> {tensor_name = "fc2.weight"} -> tensor<8x16xf32, #BSR>
  %s1 = smlir.sparsify %w1 : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr {tensor_name = "fc1.weight"} -> tensor<8x8xf32, #CSR>
  return %s1, %x, %b, %s2 : tensor<8x8xf32, #CSR>, tensor<4x8xf32>, tensor<8xf32>, tensor<8x16xf32, #BSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// An activation (no smlir.weight) is sparsified at every call: left alone.
// CHECK-LABEL: func.func @negative_not_a_weight(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[S:.*]] = smlir.sparsify %[[X]] : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr -> tensor<8x8xf32, #{{.*}}>
// CHECK-NEXT:    return %[[S]]
// GENERIC:     function_type = (tensor<8x8xf32>) -> {{.*}}, sym_name = "negative_not_a_weight"
func.func @negative_not_a_weight(%x: tensor<8x8xf32>) -> tensor<8x8xf32, #CSR> {
  %s = smlir.sparsify %x : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %s : tensor<8x8xf32, #CSR>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// Two sparsifiers on one weight cannot both be applied by the caller: the
/// argument, its attributes and both ops stay.
// CHECK-LABEL: func.func @negative_two_sparsifiers_on_one_weight(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32> {smlir.weight})
// CHECK-NEXT:    %[[S1:.*]] = smlir.sparsify %[[W]] : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr
// CHECK-NEXT:    %[[S2:.*]] = smlir.sparsify %[[W]] : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.dense
// CHECK-NEXT:    return %[[S1]], %[[S2]]
func.func @negative_two_sparsifiers_on_one_weight(%w: tensor<8x8xf32> {smlir.weight}) -> (tensor<8x8xf32, #CSR>, tensor<8x8xf32>) {
  %s1 = smlir.sparsify %w : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr -> tensor<8x8xf32, #CSR>
  %s2 = smlir.sparsify %w : tensor<8x8xf32> with #smlir.threshold<0.05> as #smlir.dense -> tensor<8x8xf32>
  return %s1, %s2 : tensor<8x8xf32, #CSR>, tensor<8x8xf32>
}

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A private function is only called from inside the module, where no caller
/// sparsifies the weight: left alone even though it has a body.
// CHECK-LABEL: func.func private @negative_private_function(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32> {smlir.weight})
// CHECK-NEXT:    %[[S:.*]] = smlir.sparsify %[[W]] : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr
// CHECK-NEXT:    return %[[S]]
func.func private @negative_private_function(%w: tensor<8x8xf32> {smlir.weight}) -> tensor<8x8xf32, #CSR> {
  %s = smlir.sparsify %w : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %s : tensor<8x8xf32, #CSR>
}

// -----

/// A declaration has no body to hoist from: unchanged (and no crash).
// CHECK-LABEL: func.func private @negative_declaration(
// CHECK-SAME:      tensor<8x8xf32> {smlir.weight})
// CHECK-SAME:      -> tensor<8x8xf32>{{$}}
func.func private @negative_declaration(tensor<8x8xf32> {smlir.weight}) -> tensor<8x8xf32>

// -----

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>

/// A public function called from inside the module: the caller passes a
/// dense tensor, so the weight is left alone (type, attributes, op) and the
/// call stays valid.
// CHECK-DAG:   #[[$CSR:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
// CHECK-LABEL: func.func @negative_called_from_module(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32> {smlir.weight}) -> tensor<8x8xf32, #[[$CSR]]>
// CHECK-NEXT:    %[[S:.*]] = smlir.sparsify %[[W]] : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr {tensor_name = "fc.weight"} -> tensor<8x8xf32, #[[$CSR]]>
// CHECK-NEXT:    return %[[S]]
// GENERIC:     function_type = (tensor<8x8xf32>) -> tensor<8x8xf32, #{{[a-z0-9_]+}}>, sym_name = "negative_called_from_module"
/// The caller, an entry point itself, still has its own weight hoisted; it
/// keeps passing its dense activation to the callee.
// CHECK-LABEL: func.func @calls_a_public_function(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x8xf32>,
// CHECK-SAME:      %[[V:[^:]*]]: tensor<8x8xf32, #[[$CSR]]> {smlir.encoding = #smlir.csr, smlir.sparsifier = #smlir.scalar_fraction<0.5>, smlir.weight})
// CHECK-NEXT:    %[[R:.*]] = call @negative_called_from_module(%[[X]]) : (tensor<8x8xf32>) -> tensor<8x8xf32, #[[$CSR]]>
// CHECK-NEXT:    return %[[R]], %[[V]] : tensor<8x8xf32, #[[$CSR]]>, tensor<8x8xf32, #[[$CSR]]>
func.func @negative_called_from_module(%w: tensor<8x8xf32> {smlir.weight}) -> tensor<8x8xf32, #CSR> {
  %s = smlir.sparsify %w : tensor<8x8xf32> with #smlir.scalar_fraction<0.9> as #smlir.csr {tensor_name = "fc.weight"} -> tensor<8x8xf32, #CSR>
  return %s : tensor<8x8xf32, #CSR>
}

func.func @calls_a_public_function(%x: tensor<8x8xf32>, %v: tensor<8x8xf32> {smlir.weight}) -> (tensor<8x8xf32, #CSR>, tensor<8x8xf32, #CSR>) {
  %r = call @negative_called_from_module(%x) : (tensor<8x8xf32>) -> tensor<8x8xf32, #CSR>
  %s = smlir.sparsify %v : tensor<8x8xf32> with #smlir.scalar_fraction<0.5> as #smlir.csr -> tensor<8x8xf32, #CSR>
  return %r, %s : tensor<8x8xf32, #CSR>, tensor<8x8xf32, #CSR>
}

// -----

#ELLCSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 16 }>

/// An ELL weight with a width: the argument takes its sparse_tensor form
/// (the CSR whose rows all hold 4 entries, 64-bit positions) and keeps
/// #smlir.ell<width = 4> as its encoding, which tells the linear kernel
/// that the rows are all 4 long.
// CHECK-DAG:   #[[$ELL:.*]] = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 64, crdWidth = 16 }>
// CHECK-LABEL: func.func @ell_weight_keeps_its_width(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x8xf32, #[[$ELL]]> {smlir.encoding = #smlir.ell<width = 4, crdWidth = 16>, smlir.sparsifier = #smlir.keep_all, smlir.weight})
// CHECK-NEXT:    return %[[W]]
func.func @ell_weight_keeps_its_width(%w: tensor<8x8xf32> {smlir.weight}) -> tensor<8x8xf32, #ELLCSR> {
  %s = smlir.sparsify %w : tensor<8x8xf32> with #smlir.keep_all as #smlir.ell<width = 4, crdWidth = 16> -> tensor<8x8xf32, #ELLCSR>
  return %s : tensor<8x8xf32, #ELLCSR>
}
