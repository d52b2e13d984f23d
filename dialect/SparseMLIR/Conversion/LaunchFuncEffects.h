//===- LaunchFuncEffects.h - memory effects of gpu.launch_func --*- C++ -*-===//
//
// MLIR 22's gpu.launch_func declares no memory effects, so upstream's
// ownership-based buffer deallocation rejects host functions that launch
// kernels on memrefs ("ops with unknown memory side effects are not
// supported"). This external model says what a launch does: it may read and
// write every memref it is given.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_CONVERSION_LAUNCHFUNCEFFECTS_H
#define SPARSE_MLIR_CONVERSION_LAUNCHFUNCEFFECTS_H

namespace mlir {
class DialectRegistry;
namespace smlir {
void registerLaunchFuncMemoryEffects(DialectRegistry &registry);
} // namespace smlir
} // namespace mlir

#endif // SPARSE_MLIR_CONVERSION_LAUNCHFUNCEFFECTS_H
