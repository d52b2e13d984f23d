//===- InitAll.h - register every smlir dialect, pass, pipeline -*- C++ -*-===//
//
// The one registration point used by sparse-mlir-opt, the C API and the
// Python extension.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_INITALL_H
#define SPARSE_MLIR_INITALL_H

namespace mlir {
class DialectRegistry;
namespace smlir {
void registerAllDialects(DialectRegistry &registry);
void registerAllPasses();
} // namespace smlir
} // namespace mlir

#endif // SPARSE_MLIR_INITALL_H
