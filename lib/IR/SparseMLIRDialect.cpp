//===- SparseMLIRDialect.cpp - smlir dialect ------------------------------===//

#include "SparseMLIR/IR/SparseMLIRDialect.h"
#include "SparseMLIR/IR/SparseMLIROps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::smlir;

#include "SparseMLIR/IR/SparseMLIRDialect.cpp.inc"

void SparseMLIRDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "SparseMLIR/IR/SparseMLIROps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Discardable attributes on function arguments
//===----------------------------------------------------------------------===//

LogicalResult SparseMLIRDialect::verifyRegionArgAttribute(
    Operation *op, unsigned regionIndex, unsigned argIndex,
    NamedAttribute attr) {
  auto emit = [&]() {
    return op->emitOpError() << "argument #" << argIndex << ": '"
                             << attr.getName().getValue() << "' ";
  };
  // The argument's other attributes (a scratch buffer needs its operand).
  auto sibling = [&](StringRef name) -> Attribute {
    if (regionIndex != 0)
      return {};
    if (auto func = dyn_cast<FunctionOpInterface>(op))
      return func.getArgAttr(argIndex, name);
    return {};
  };
  StringRef name = attr.getName().getValue();
  if (name == kDeviceAttrName) {
    auto device = dyn_cast<DeviceBufferAttr>(attr.getValue());
    if (!device)
      return emit() << "expects a #smlir.device_buffer, got "
                    << attr.getValue();
    if (device.getValue() == DeviceBuffer::Scratch &&
        !sibling(kKernelOperandAttrName))
      return emit() << "#smlir.device_buffer<scratch> needs '"
                    << kKernelOperandAttrName << "' (which kernel operand)";
    return success();
  }
  if (name == kKernelOperandAttrName) {
    if (!isa<KernelOperandAttr>(attr.getValue()))
      return emit() << "expects a #smlir.kernel_operand, got "
                    << attr.getValue();
    auto device = dyn_cast_or_null<DeviceBufferAttr>(sibling(kDeviceAttrName));
    if (!device || device.getValue() != DeviceBuffer::Scratch)
      return emit() << "is only valid on a '" << kDeviceAttrName
                    << "' = #smlir.device_buffer<scratch> argument";
    return success();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Custom attribute parameters
//===----------------------------------------------------------------------===//

FailureOr<llvm::APFloat> mlir::smlir::parseF64Parameter(AsmParser &parser) {
  llvm::APFloat value(0.0);
  if (parser.parseFloat(llvm::APFloat::IEEEdouble(), value))
    return failure();
  return value;
}

void mlir::smlir::printF64Parameter(AsmPrinter &printer,
                                    const llvm::APFloat &value) {
  double d = value.convertToDouble();
  // NaN and infinities have no decimal spelling in MLIR: print the bits.
  if (!std::isfinite(d)) {
    printer << llvm::format_hex(value.bitcastToAPInt().getZExtValue(), 18,
                                /*Upper=*/true);
    return;
  }
  // Shortest decimal that round-trips, always lexed as a float literal.
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.*g", precision, d);
    text = buf;
    if (std::strtod(text.c_str(), nullptr) == d)
      break;
  }
  size_t exp = text.find_first_of("eE");
  if (text.find('.') == std::string::npos)
    text.insert(exp == std::string::npos ? text.size() : exp, ".0");
  printer << text;
}

FailureOr<SmallVector<int64_t>>
mlir::smlir::parseBlockParameter(AsmParser &parser) {
  SmallVector<int64_t> block;
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            int64_t v;
            if (parser.parseInteger(v))
              return failure();
            block.push_back(v);
            return success();
          }))
    return failure();
  return block;
}

void mlir::smlir::printBlockParameter(AsmPrinter &printer,
                                      ArrayRef<int64_t> block) {
  printer << '[';
  llvm::interleaveComma(block, printer);
  printer << ']';
}

FailureOr<bool> mlir::smlir::parseBoolParameter(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected 'true' or 'false'");
}
