/*===- Dialect.h - C API of the smlir dialect ---------------------*- C -*-===*\
|*                                                                            *|
|* The C API the Python extension uses: dialect registration, the two       *|
|* attribute interfaces, pass registration.                                  *|
\*===----------------------------------------------------------------------===*/

#ifndef SPARSE_MLIR_C_DIALECT_H
#define SPARSE_MLIR_C_DIALECT_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(SparseMLIR, smlir);

/// Registers the smlir passes and pipelines (idempotent).
MLIR_CAPI_EXPORTED void mlirSparseMLIRRegisterAllPasses(void);

/// Appends smlir's dialect registry (external interface models on upstream
/// ops, e.g. gpu.launch_func's memory effects) to `context`.
MLIR_CAPI_EXPORTED void mlirSparseMLIRAppendDialectRegistry(MlirContext context);

/// True when `attr` implements smlir's EncodingAttrInterface.
MLIR_CAPI_EXPORTED bool mlirAttributeIsASparseMLIREncoding(MlirAttribute attr);

/// The `#sparse_tensor.encoding` for a tensor of `rank`; null for dense.
MLIR_CAPI_EXPORTED MlirAttribute
mlirSparseMLIREncodingGetSparseTensorEncoding(MlirAttribute attr, int64_t rank);

/// Writes the format's short name (`csr`, `2:4`, ...) through `callback`.
MLIR_CAPI_EXPORTED void
mlirSparseMLIREncodingGetFormatName(MlirAttribute attr,
                                    MlirStringCallback callback,
                                    void *userData);

/// True when `attr` implements smlir's SparsifierAttrInterface.
MLIR_CAPI_EXPORTED bool mlirAttributeIsASparseMLIRSparsifier(MlirAttribute attr);

/// 0 streaming, 1 blocking, 2 materializing.
MLIR_CAPI_EXPORTED int32_t mlirSparseMLIRSparsifierGetKind(MlirAttribute attr);

/// True when the sparsifier compares magnitudes (needs a float tensor).
MLIR_CAPI_EXPORTED bool
mlirSparseMLIRSparsifierNeedsOrdering(MlirAttribute attr);

/// Checks that the smlir encoding or sparsifier `attr` fits a tensor of
/// shape `shape` (its `verifyShape`): true when it does; otherwise false,
/// with the verifier's message written through `callback`.
MLIR_CAPI_EXPORTED bool
mlirSparseMLIRVerifyShape(MlirAttribute attr, intptr_t rank,
                          const int64_t *shape, MlirStringCallback callback,
                          void *userData);

/// Calls `callback` with the name of each discardable attribute the dialect
/// declares (`smlir.weight`, `smlir.tensor_name`, ...).
MLIR_CAPI_EXPORTED void
mlirSparseMLIRGetDiscardableAttrNames(MlirStringCallback callback,
                                      void *userData);

/// True when `attr` is an `#smlir.storage` decision.
MLIR_CAPI_EXPORTED bool mlirAttributeIsASparseMLIRStorage(MlirAttribute attr);

/// True for `#smlir.storage<sparse>`, false for `<dense, ...>`.
MLIR_CAPI_EXPORTED bool mlirSparseMLIRStorageIsSparse(MlirAttribute attr);

/// The reason of an `#smlir.storage` (empty when none).
MLIR_CAPI_EXPORTED MlirStringRef
mlirSparseMLIRStorageGetReason(MlirAttribute attr);

/// True when `attr` is an `#smlir.fusion` decision.
MLIR_CAPI_EXPORTED bool mlirAttributeIsASparseMLIRFusion(MlirAttribute attr);

/// True for `#smlir.fusion<fused, ...>`, false for `<not_fused, ...>`.
MLIR_CAPI_EXPORTED bool mlirSparseMLIRFusionIsFused(MlirAttribute attr);

/// The fused tensor's name and the reason of an `#smlir.fusion` (empty when
/// none).
MLIR_CAPI_EXPORTED MlirStringRef
mlirSparseMLIRFusionGetTensor(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirStringRef
mlirSparseMLIRFusionGetReason(MlirAttribute attr);

/// True when `attr` is an `#smlir.device_buffer` (the value of
/// `smlir.device` on a device argument of convert-smlir-to-nvgpu).
MLIR_CAPI_EXPORTED bool
mlirAttributeIsASparseMLIRDeviceBuffer(MlirAttribute attr);

/// The case name of an `#smlir.device_buffer`: `nm24_values`,
/// `nm24_metadata` or `scratch` (static storage).
MLIR_CAPI_EXPORTED MlirStringRef
mlirSparseMLIRDeviceBufferGetName(MlirAttribute attr);

/// True when `attr` is an `#smlir.kernel_operand` (the value of
/// `smlir.kernel_operand` on a scratch device argument).
MLIR_CAPI_EXPORTED bool
mlirAttributeIsASparseMLIRKernelOperand(MlirAttribute attr);

/// The case name of an `#smlir.kernel_operand`: `x`, `y` or `bias` (static
/// storage).
MLIR_CAPI_EXPORTED MlirStringRef
mlirSparseMLIRKernelOperandGetName(MlirAttribute attr);

#ifdef __cplusplus
}
#endif

#endif // SPARSE_MLIR_C_DIALECT_H
