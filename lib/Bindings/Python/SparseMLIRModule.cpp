//===- SparseMLIRModule.cpp - nanobind extension `_smlir` -----------------===//
//
// Uses only the C API and NanobindAdaptors, so the extension shares the MLIR
// copy inside the mlir wheel's libMLIRPythonCAPI.so: our attributes, upstream
// sparse_tensor, PassManager and ExecutionEngine live in one context.
//
//===----------------------------------------------------------------------===//

#include "SparseMLIR-c/Dialect.h"

#include "mlir-c/IR.h"
#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace nb = nanobind;
using namespace mlir::python::nanobind_adaptors;

static void requireEncoding(MlirAttribute attr) {
  if (!mlirAttributeIsASparseMLIREncoding(attr))
    throw nb::type_error("expected an smlir encoding attribute "
                         "(#smlir.dense, #smlir.csr, ...)");
}

static void requireSparsifier(MlirAttribute attr) {
  if (!mlirAttributeIsASparseMLIRSparsifier(attr))
    throw nb::type_error("expected an smlir sparsifier attribute "
                         "(#smlir.keep_all, #smlir.threshold<...>, ...)");
}

static std::string toString(MlirStringRef s) {
  return std::string(s.data, s.length);
}

NB_MODULE(_smlir, m) {
  m.doc() = "sparse_mlir native extension: the smlir dialect and its passes";

  m.def(
      "register_dialect",
      [](MlirContext context, bool load) {
        MlirDialectHandle handle = mlirGetDialectHandle__smlir__();
        mlirDialectHandleRegisterDialect(handle, context);
        mlirSparseMLIRAppendDialectRegistry(context);
        if (load)
          mlirDialectHandleLoadDialect(handle, context);
      },
      nb::arg("context").none() = nb::none(), nb::arg("load") = true,
      "Registers (and by default loads) the smlir dialect in `context`.");
  m.def("register_passes", &mlirSparseMLIRRegisterAllPasses,
        "Registers smlir passes and pipelines with the global registry.");

  m.def("is_encoding", &mlirAttributeIsASparseMLIREncoding, nb::arg("attr"));
  m.def("is_sparsifier", &mlirAttributeIsASparseMLIRSparsifier,
        nb::arg("attr"));
  m.def(
      "sparse_tensor_encoding",
      [](MlirAttribute attr, int64_t rank) -> std::optional<MlirAttribute> {
        requireEncoding(attr);
        if (rank < 1)
          throw nb::value_error("rank must be >= 1");
        MlirAttribute enc =
            mlirSparseMLIREncodingGetSparseTensorEncoding(attr, rank);
        if (mlirAttributeIsNull(enc))
          return std::nullopt;
        return enc;
      },
      nb::arg("encoding"), nb::arg("rank"),
      "The #sparse_tensor.encoding an smlir encoding stands for at `rank` "
      "(None for #smlir.dense).");
  m.def(
      "format_name",
      [](MlirAttribute attr) {
        requireEncoding(attr);
        std::string name;
        mlirSparseMLIREncodingGetFormatName(
            attr,
            [](MlirStringRef s, void *userData) {
              static_cast<std::string *>(userData)->append(s.data, s.length);
            },
            &name);
        return name;
      },
      nb::arg("encoding"));
  m.def(
      "sparsifier_kind",
      [](MlirAttribute attr) -> std::string {
        requireSparsifier(attr);
        switch (mlirSparseMLIRSparsifierGetKind(attr)) {
        case 0:
          return "streaming";
        case 1:
          return "blocking";
        default:
          return "materializing";
        }
      },
      nb::arg("sparsifier"));
  m.def(
      "sparsifier_needs_ordering",
      [](MlirAttribute attr) {
        requireSparsifier(attr);
        return mlirSparseMLIRSparsifierNeedsOrdering(attr);
      },
      nb::arg("sparsifier"));

  m.def(
      "shape_error",
      [](MlirAttribute attr,
         const std::vector<int64_t> &shape) -> std::optional<std::string> {
        if (!mlirAttributeIsASparseMLIREncoding(attr) &&
            !mlirAttributeIsASparseMLIRSparsifier(attr))
          throw nb::type_error("expected an smlir encoding or sparsifier");
        std::string message;
        if (mlirSparseMLIRVerifyShape(
                attr, static_cast<intptr_t>(shape.size()), shape.data(),
                [](MlirStringRef s, void *userData) {
                  static_cast<std::string *>(userData)->append(s.data,
                                                                s.length);
                },
                &message))
          return std::nullopt;
        return message;
      },
      nb::arg("attr"), nb::arg("shape"),
      "Why the encoding or sparsifier `attr` cannot apply to a tensor of "
      "`shape` (its C++ verifyShape), or None when it can.");
  m.def(
      "discardable_attr_names",
      [] {
        std::vector<std::string> names;
        mlirSparseMLIRGetDiscardableAttrNames(
            [](MlirStringRef s, void *userData) {
              static_cast<std::vector<std::string> *>(userData)->push_back(
                  toString(s));
            },
            &names);
        return names;
      },
      "The `smlir.*` attribute names the dialect declares.");
  m.def(
      "storage_decision",
      [](MlirAttribute attr) -> std::optional<std::pair<bool, std::string>> {
        if (!mlirAttributeIsASparseMLIRStorage(attr))
          return std::nullopt;
        return std::make_pair(mlirSparseMLIRStorageIsSparse(attr),
                              toString(mlirSparseMLIRStorageGetReason(attr)));
      },
      nb::arg("attr"),
      "(stored sparse, reason) of an #smlir.storage, else None.");
  m.def(
      "fusion_decision",
      [](MlirAttribute attr)
          -> std::optional<std::tuple<bool, std::string, std::string>> {
        if (!mlirAttributeIsASparseMLIRFusion(attr))
          return std::nullopt;
        return std::make_tuple(mlirSparseMLIRFusionIsFused(attr),
                               toString(mlirSparseMLIRFusionGetTensor(attr)),
                               toString(mlirSparseMLIRFusionGetReason(attr)));
      },
      nb::arg("attr"),
      "(fused, tensor, reason) of an #smlir.fusion, else None.");
  m.def(
      "device_buffer",
      [](MlirAttribute attr) -> std::optional<std::string> {
        if (!mlirAttributeIsASparseMLIRDeviceBuffer(attr))
          return std::nullopt;
        return toString(mlirSparseMLIRDeviceBufferGetName(attr));
      },
      nb::arg("attr"),
      "The case of an #smlir.device_buffer ('nm24_values', "
      "'nm24_metadata', 'scratch'), else None.");
  m.def(
      "kernel_operand",
      [](MlirAttribute attr) -> std::optional<std::string> {
        if (!mlirAttributeIsASparseMLIRKernelOperand(attr))
          return std::nullopt;
        return toString(mlirSparseMLIRKernelOperandGetName(attr));
      },
      nb::arg("attr"),
      "The case of an #smlir.kernel_operand ('x', 'y', 'bias'), else None.");
}
