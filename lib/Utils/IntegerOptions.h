//===- IntegerOptions.h - diagnose unparsable integer pass options -*- C++ -*-===//
//
// llvm::cl prints its own message to stderr when an integer option does not
// parse (an out-of-range value, a word) and MLIR then reports an *empty*
// error. Passes with integer options check them first, with a diagnostic
// that names the pass, the option and the value.
//
//===----------------------------------------------------------------------===//

#ifndef SPARSE_MLIR_LIB_UTILS_INTEGEROPTIONS_H
#define SPARSE_MLIR_LIB_UTILS_INTEGEROPTIONS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

namespace mlir::smlir {

/// Fails through `errorHandler` when an option of `integerOptions` in
/// `options` ("name=value name=value ...") is not an int64_t.
inline LogicalResult
checkIntegerOptions(StringRef pass, StringRef options,
                    ArrayRef<StringRef> integerOptions,
                    function_ref<LogicalResult(const Twine &)> errorHandler) {
  SmallVector<StringRef> words;
  options.split(words, ' ', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef word : words) {
    auto [name, value] = word.split('=');
    if (!llvm::is_contained(integerOptions, name.trim()))
      continue;
    int64_t parsed;
    if (value.trim().getAsInteger(/*Radix=*/0, parsed))
      return errorHandler(pass + ": option '" + name.trim() +
                          "' expects an integer (int64), got '" +
                          value.trim() + "'");
  }
  return success();
}

} // namespace mlir::smlir

#endif // SPARSE_MLIR_LIB_UTILS_INTEGEROPTIONS_H
