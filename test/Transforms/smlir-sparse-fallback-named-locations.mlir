// RUN: sparse-mlir-opt %s -smlir-sparse-fallback 2>&1 >/dev/null | FileCheck %s

// One warning per (op, format, tensor) and per named location: the importer
// names each op's location after its torch.fx node, so two torch ops that
// lower to the same MLIR op (exp and cos, both linalg.generic) are two
// warnings, which the caller then names by torch op; the same node twice is
// one. (Checked on stderr: -verify-diagnostics matches file locations only.)

#CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32 }>
#ID = affine_map<(d0, d1) -> (d0, d1)>

// CHECK:     warning: loc("exp"): no sparse lowering for 'linalg.generic' reading tensor 'w' stored as csr; computing it densely
// CHECK:     warning: loc("cos"): no sparse lowering for 'linalg.generic' reading tensor 'w' stored as csr; computing it densely
// CHECK-NOT: warning:
func.func @one_warning_per_named_location(%w: tensor<8x8xf32, #CSR> {smlir.encoding = #smlir.csr, smlir.tensor_name = "w"}) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %a = linalg.generic {indexing_maps = [#ID, #ID], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x8xf32, #CSR>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = math.exp %x : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32> loc("exp")
  %b = linalg.generic {indexing_maps = [#ID, #ID], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x8xf32, #CSR>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = math.cos %x : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32> loc("cos")
  %c = linalg.generic {indexing_maps = [#ID, #ID], iterator_types = ["parallel", "parallel"]} ins(%w : tensor<8x8xf32, #CSR>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = math.cos %x : f32
    linalg.yield %m : f32
  } -> tensor<8x8xf32> loc("cos")
  return %a, %b, %c : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
