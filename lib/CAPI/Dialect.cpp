//===- Dialect.cpp - C API of the smlir dialect ---------------------------===//

#include "SparseMLIR-c/Dialect.h"
#include "SparseMLIR/IR/SparseMLIRDialect.h"
#include "SparseMLIR/InitAll.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::smlir;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(SparseMLIR, smlir, SparseMLIRDialect)

void mlirSparseMLIRRegisterAllPasses(void) { registerAllPasses(); }

void mlirSparseMLIRAppendDialectRegistry(MlirContext context) {
  DialectRegistry registry;
  registerAllDialects(registry);
  unwrap(context)->appendDialectRegistry(registry);
}

bool mlirAttributeIsASparseMLIREncoding(MlirAttribute attr) {
  return isa<EncodingAttrInterface>(unwrap(attr));
}

MlirAttribute mlirSparseMLIREncodingGetSparseTensorEncoding(MlirAttribute attr,
                                                            int64_t rank) {
  return wrap(cast<EncodingAttrInterface>(unwrap(attr))
                  .getSparseTensorEncoding(rank));
}

void mlirSparseMLIREncodingGetFormatName(MlirAttribute attr,
                                         MlirStringCallback callback,
                                         void *userData) {
  std::string name = cast<EncodingAttrInterface>(unwrap(attr)).getFormatName();
  callback(mlirStringRefCreate(name.data(), name.size()), userData);
}

bool mlirAttributeIsASparseMLIRSparsifier(MlirAttribute attr) {
  return isa<SparsifierAttrInterface>(unwrap(attr));
}

int32_t mlirSparseMLIRSparsifierGetKind(MlirAttribute attr) {
  return static_cast<int32_t>(
      cast<SparsifierAttrInterface>(unwrap(attr)).getKind());
}

bool mlirSparseMLIRSparsifierNeedsOrdering(MlirAttribute attr) {
  return cast<SparsifierAttrInterface>(unwrap(attr)).needsOrdering();
}

bool mlirSparseMLIRVerifyShape(MlirAttribute attr, intptr_t rank,
                               const int64_t *shape,
                               MlirStringCallback callback, void *userData) {
  Attribute attribute = unwrap(attr);
  MLIRContext *context = attribute.getContext();
  // The verifier reports through a diagnostic; its message is the answer.
  std::string message;
  ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
    if (message.empty())
      message = diag.str();
    return success();
  });
  auto emitError = [&] { return mlir::emitError(UnknownLoc::get(context)); };
  ArrayRef<int64_t> dims(shape, rank);
  LogicalResult fits = success();
  if (auto encoding = dyn_cast<EncodingAttrInterface>(attribute))
    fits = encoding.verifyShape(dims, emitError);
  else if (auto sparsifier = dyn_cast<SparsifierAttrInterface>(attribute))
    fits = sparsifier.verifyShape(dims, emitError);
  if (failed(fits))
    callback(mlirStringRefCreate(message.data(), message.size()), userData);
  return succeeded(fits);
}

void mlirSparseMLIRGetDiscardableAttrNames(MlirStringCallback callback,
                                           void *userData) {
  for (StringRef name :
       {kWeightAttrName, kTensorNameAttrName, kSparsifierAttrName,
        kEncodingAttrName, kStorageAttrName, kCallNumberAttrName,
        kDeviceAttrName, kMmaKAttrName, kKernelOperandAttrName,
        kInferredEncodingAttrName, kFusionAttrName})
    callback(wrap(name), userData);
}

bool mlirAttributeIsASparseMLIRStorage(MlirAttribute attr) {
  return isa<StorageAttr>(unwrap(attr));
}

bool mlirSparseMLIRStorageIsSparse(MlirAttribute attr) {
  return cast<StorageAttr>(unwrap(attr)).getKind() == StorageKind::Sparse;
}

MlirStringRef mlirSparseMLIRStorageGetReason(MlirAttribute attr) {
  return wrap(cast<StorageAttr>(unwrap(attr)).getReason());
}

bool mlirAttributeIsASparseMLIRFusion(MlirAttribute attr) {
  return isa<FusionAttr>(unwrap(attr));
}

bool mlirSparseMLIRFusionIsFused(MlirAttribute attr) {
  return cast<FusionAttr>(unwrap(attr)).getKind() == FusionKind::Fused;
}

MlirStringRef mlirSparseMLIRFusionGetTensor(MlirAttribute attr) {
  return wrap(cast<FusionAttr>(unwrap(attr)).getTensor());
}

MlirStringRef mlirSparseMLIRFusionGetReason(MlirAttribute attr) {
  return wrap(cast<FusionAttr>(unwrap(attr)).getReason());
}

bool mlirAttributeIsASparseMLIRDeviceBuffer(MlirAttribute attr) {
  return isa<DeviceBufferAttr>(unwrap(attr));
}

MlirStringRef mlirSparseMLIRDeviceBufferGetName(MlirAttribute attr) {
  return wrap(
      stringifyDeviceBuffer(cast<DeviceBufferAttr>(unwrap(attr)).getValue()));
}

bool mlirAttributeIsASparseMLIRKernelOperand(MlirAttribute attr) {
  return isa<KernelOperandAttr>(unwrap(attr));
}

MlirStringRef mlirSparseMLIRKernelOperandGetName(MlirAttribute attr) {
  return wrap(stringifyKernelOperand(
      cast<KernelOperandAttr>(unwrap(attr)).getValue()));
}
