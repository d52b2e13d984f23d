//===- SparseMLIRAttrs.cpp - encodings and sparsifiers --------------------===//

#include "SparseMLIR/IR/SparseMLIRDialect.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::smlir;
using sparse_tensor::LevelFormat;
using sparse_tensor::LevelPropNonDefault;
using sparse_tensor::LevelType;
using sparse_tensor::SparseTensorEncodingAttr;

#include "SparseMLIR/IR/SparseMLIREnums.cpp.inc"
#include "SparseMLIR/IR/SparseMLIRAttrInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "SparseMLIR/IR/SparseMLIRAttrs.cpp.inc"

void SparseMLIRDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "SparseMLIR/IR/SparseMLIRAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << "?";
    else
      os << d;
  });
  os << "]";
  return s;
}

static LogicalResult verifyWidth(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef what, unsigned width) {
  if (width == 0 || width == 8 || width == 16 || width == 32 || width == 64)
    return success();
  return emitError() << what
                     << " must be 0 (index), 8, 16, 32 or 64, got " << width;
}

static LogicalResult verifyWidths(function_ref<InFlightDiagnostic()> emitError,
                                  unsigned posWidth, unsigned crdWidth) {
  return success(succeeded(verifyWidth(emitError, "posWidth", posWidth)) &&
                 succeeded(verifyWidth(emitError, "crdWidth", crdWidth)));
}

static LogicalResult verifyBlock(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> block) {
  if (block.empty())
    return emitError() << "block must have at least one dimension";
  for (int64_t b : block)
    if (b <= 0)
      return emitError() << "block sizes must be positive, got "
                         << shapeString(block);
  return success();
}

/// `value` as its shortest decimal spelling (0.1, not 1.000000e-01): the
/// text a user wrote, in Python or in IR.
static std::string floatString(const llvm::APFloat &value) {
  double d = value.convertToDouble();
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, d);
    if (std::isnan(d) || std::strtod(text, nullptr) == d)
      break;
  }
  return text;
}

static LogicalResult verifyFraction(function_ref<InFlightDiagnostic()> emitError,
                                    const llvm::APFloat &fraction) {
  double f = fraction.convertToDouble();
  if (!(f >= 0.0 && f <= 1.0)) // also rejects NaN
    return emitError() << "fraction must be in [0, 1], got "
                       << floatString(fraction);
  return success();
}

static LogicalResult verifyNM(function_ref<InFlightDiagnostic()> emitError,
                              int64_t n, int64_t m) {
  if (n <= 0 || n >= m)
    return emitError() << "n:m needs 0 < n < m, got " << n << ":" << m;
  if (m > 255)
    return emitError() << "n:m supports m <= 255, got m = " << m;
  return success();
}

static bool divides(int64_t block, int64_t dim) {
  return ShapedType::isDynamic(dim) || dim % block == 0;
}

static LogicalResult verifyMinRank(function_ref<InFlightDiagnostic()> emitError,
                                   Attribute attr, ArrayRef<int64_t> shape,
                                   int64_t minRank) {
  if (static_cast<int64_t>(shape.size()) >= minRank)
    return success();
  return emitError() << "encoding " << attr << " needs a tensor of rank >= "
                     << minRank << ", got rank " << shape.size()
                     << " (shape " << shapeString(shape) << ")";
}

static SparseTensorEncodingAttr makeEncoding(MLIRContext *ctx,
                                             ArrayRef<LevelType> lvlTypes,
                                             AffineMap dimToLvl,
                                             unsigned posWidth,
                                             unsigned crdWidth) {
  return SparseTensorEncodingAttr::get(ctx, lvlTypes, dimToLvl, AffineMap(),
                                       posWidth, crdWidth);
}

static LevelType denseLT() { return LevelType(LevelFormat::Dense); }

static LevelType compressedLT(bool unique = true) {
  if (unique)
    return LevelType(LevelFormat::Compressed);
  return *sparse_tensor::buildLevelType(LevelFormat::Compressed,
                                        {LevelPropNonDefault::Nonunique});
}

//===----------------------------------------------------------------------===//
// Encodings
//===----------------------------------------------------------------------===//

std::string DenseEncodingAttr::getFormatName() const { return "dense"; }

SparseTensorEncodingAttr DenseEncodingAttr::getSparseTensorEncoding(int64_t) const {
  return {};
}

LogicalResult
DenseEncodingAttr::verifyShape(ArrayRef<int64_t>,
                               function_ref<InFlightDiagnostic()>) const {
  return success();
}

// CSR ------------------------------------------------------------------------

LogicalResult CSREncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      unsigned posWidth, unsigned crdWidth) {
  return verifyWidths(emitError, posWidth, crdWidth);
}

std::string CSREncodingAttr::getFormatName() const { return "csr"; }

SparseTensorEncodingAttr CSREncodingAttr::getSparseTensorEncoding(int64_t rank) const {
  SmallVector<LevelType> lvls(rank - 1, denseLT());
  lvls.push_back(compressedLT());
  return makeEncoding(getContext(), lvls, AffineMap(), getPosWidth(),
                      getCrdWidth());
}

LogicalResult
CSREncodingAttr::verifyShape(ArrayRef<int64_t> shape,
                             function_ref<InFlightDiagnostic()> emitError) const {
  return verifyMinRank(emitError, *this, shape, 2);
}

// CSC ------------------------------------------------------------------------

LogicalResult CSCEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      unsigned posWidth, unsigned crdWidth) {
  return verifyWidths(emitError, posWidth, crdWidth);
}

std::string CSCEncodingAttr::getFormatName() const { return "csc"; }

SparseTensorEncodingAttr CSCEncodingAttr::getSparseTensorEncoding(int64_t rank) const {
  MLIRContext *ctx = getContext();
  SmallVector<unsigned> perm = llvm::to_vector(llvm::seq<unsigned>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  SmallVector<LevelType> lvls(rank - 1, denseLT());
  lvls.push_back(compressedLT());
  return makeEncoding(ctx, lvls, AffineMap::getPermutationMap(perm, ctx),
                      getPosWidth(), getCrdWidth());
}

LogicalResult
CSCEncodingAttr::verifyShape(ArrayRef<int64_t> shape,
                             function_ref<InFlightDiagnostic()> emitError) const {
  return verifyMinRank(emitError, *this, shape, 2);
}

// COO ------------------------------------------------------------------------

LogicalResult COOEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      unsigned posWidth, unsigned crdWidth) {
  return verifyWidths(emitError, posWidth, crdWidth);
}

std::string COOEncodingAttr::getFormatName() const { return "coo"; }

SparseTensorEncodingAttr COOEncodingAttr::getSparseTensorEncoding(int64_t rank) const {
  SmallVector<LevelType> lvls;
  if (rank == 1) {
    lvls.push_back(compressedLT());
  } else {
    lvls.push_back(compressedLT(/*unique=*/false));
    for (int64_t l = 1; l < rank - 1; ++l)
      lvls.push_back(*sparse_tensor::buildLevelType(
          LevelFormat::Singleton,
          {LevelPropNonDefault::Nonunique, LevelPropNonDefault::SoA}));
    lvls.push_back(*sparse_tensor::buildLevelType(
        LevelFormat::Singleton, {LevelPropNonDefault::SoA}));
  }
  return makeEncoding(getContext(), lvls, AffineMap(), getPosWidth(),
                      getCrdWidth());
}

LogicalResult
COOEncodingAttr::verifyShape(ArrayRef<int64_t> shape,
                             function_ref<InFlightDiagnostic()> emitError) const {
  return verifyMinRank(emitError, *this, shape, 1);
}

// BSR ------------------------------------------------------------------------

LogicalResult BSREncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      ArrayRef<int64_t> block,
                                      unsigned posWidth, unsigned crdWidth) {
  if (block.size() != 2)
    return emitError() << "bsr block must have 2 sizes [rows, cols], got "
                       << shapeString(block);
  if (failed(verifyBlock(emitError, block)))
    return failure();
  // i floordiv 1 and i mod 1 fold to i and 0: sparse_tensor cannot invert
  // the block map (it asserts), and a 1-wide block is CSR-like anyway.
  if (llvm::is_contained(block, 1)) {
    InFlightDiagnostic diag = emitError();
    diag << "bsr block sizes must be >= 2, got " << shapeString(block)
         << " (sparse_tensor cannot store a block of size 1 along a "
            "dimension); ";
    if (block[0] == 1 && block[1] == 1)
      return diag << "use csr (a 1 x 1 block is one entry)";
    return diag << "use csr, or block [" << std::max<int64_t>(block[0], 2)
                << ", " << std::max<int64_t>(block[1], 2) << "]";
  }
  return verifyWidths(emitError, posWidth, crdWidth);
}

std::string BSREncodingAttr::getFormatName() const { return "bsr"; }

SparseTensorEncodingAttr BSREncodingAttr::getSparseTensorEncoding(int64_t) const {
  MLIRContext *ctx = getContext();
  AffineExpr i = getAffineDimExpr(0, ctx), j = getAffineDimExpr(1, ctx);
  int64_t r = getBlock()[0], c = getBlock()[1];
  AffineMap dimToLvl = AffineMap::get(
      2, 0, {i.floorDiv(r), j.floorDiv(c), i % r, j % c}, ctx);
  return makeEncoding(ctx, {denseLT(), compressedLT(), denseLT(), denseLT()},
                      dimToLvl, getPosWidth(), getCrdWidth());
}

LogicalResult
BSREncodingAttr::verifyShape(ArrayRef<int64_t> shape,
                             function_ref<InFlightDiagnostic()> emitError) const {
  if (shape.size() != 2)
    return emitError() << "encoding " << *this
                       << " needs a tensor of rank 2, got rank " << shape.size()
                       << " (shape " << shapeString(shape) << ")";
  if (!divides(getBlock()[0], shape[0]) || !divides(getBlock()[1], shape[1]))
    return emitError() << "encoding " << *this << " needs block ["
                       << getBlock()[0] << ", " << getBlock()[1]
                       << "] to divide the shape " << shapeString(shape);
  // One block along a dimension folds its block coordinate to 0: the map is
  // not invertible either.
  if (shape[0] == getBlock()[0] || shape[1] == getBlock()[1])
    return emitError() << "encoding " << *this << " needs at least 2 blocks "
                       << "along each dimension of shape "
                       << shapeString(shape);
  return success();
}

// n:m ------------------------------------------------------------------------

/// `rows` > 1 (grouped n:m): the groups of rows of a tensor of `shape`.
/// `rows` need not divide dimension rank - 2: the last group holds the rows
/// left (n:m storage keeps every row's coordinates, so it fits as is).
static LogicalResult verifyNMRows(function_ref<InFlightDiagnostic()> emitError,
                                  Attribute attr, int64_t rows,
                                  ArrayRef<int64_t> shape) {
  if (rows == 1)
    return success();
  if (shape.size() < 2)
    return emitError() << attr << " shares patterns across rows: needs rank "
                       << ">= 2, got shape " << shapeString(shape);
  return success();
}

static LogicalResult verifyRowsValue(function_ref<InFlightDiagnostic()> emitError,
                                     int64_t rows) {
  if (rows < 1)
    return emitError() << "rows sharing a pattern must be >= 1, got " << rows;
  return success();
}

LogicalResult NMEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                     int64_t n, int64_t m, unsigned crdWidth,
                                     int64_t rows) {
  return success(succeeded(verifyNM(emitError, n, m)) &&
                 succeeded(verifyWidth(emitError, "crdWidth", crdWidth)) &&
                 succeeded(verifyRowsValue(emitError, rows)));
}

std::string NMEncodingAttr::getFormatName() const {
  std::string name = std::to_string(getN()) + ":" + std::to_string(getM());
  if (getRows() != 1)
    name += " (" + std::to_string(getRows()) + " rows)";
  return name;
}

SparseTensorEncodingAttr NMEncodingAttr::getSparseTensorEncoding(int64_t rank) const {
  MLIRContext *ctx = getContext();
  SmallVector<AffineExpr> results;
  for (int64_t d = 0; d < rank - 1; ++d)
    results.push_back(getAffineDimExpr(d, ctx));
  AffineExpr last = getAffineDimExpr(rank - 1, ctx);
  results.push_back(last.floorDiv(getM()));
  results.push_back(last % getM());
  SmallVector<LevelType> lvls(rank, denseLT());
  lvls.push_back(*sparse_tensor::buildLevelType(LevelFormat::NOutOfM,
                                                std::vector<LevelPropNonDefault>{}, getN(),
                                                getM()));
  return makeEncoding(ctx, lvls, AffineMap::get(rank, 0, results, ctx),
                      /*posWidth=*/0, getCrdWidth());
}

LogicalResult
NMEncodingAttr::verifyShape(ArrayRef<int64_t> shape,
                            function_ref<InFlightDiagnostic()> emitError) const {
  if (failed(verifyMinRank(emitError, *this, shape, 1)))
    return failure();
  if (!divides(getM(), shape.back()))
    return emitError() << "encoding " << *this << " needs m = " << getM()
                       << " to divide the last dimension, got shape "
                       << shapeString(shape);
  return verifyNMRows(emitError, *this, getRows(), shape);
}

// ELL ------------------------------------------------------------------------

LogicalResult ELLEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      std::optional<int64_t> width,
                                      unsigned crdWidth) {
  if (width && *width < 1)
    return emitError() << "ell width must be >= 1 (nonzeros stored per row), "
                       << "got " << *width;
  return verifyWidth(emitError, "crdWidth", crdWidth);
}

std::string ELLEncodingAttr::getFormatName() const { return "ell"; }

// With a width, the CSR whose rows all hold `width` entries (positions 0,
// width, 2 * width, ... as 64-bit: N * width may pass 2^32): upstream
// reads it as it is, and a linear's micro-kernel, told by the argument's
// smlir.encoding, reads it without positions (ELLWeight.cpp). Without a
// width (picked when a weight is stored) there is no such form yet.
SparseTensorEncodingAttr ELLEncodingAttr::getSparseTensorEncoding(int64_t rank) const {
  if (!getWidth() || rank != 2)
    return {};
  return makeEncoding(getContext(), {denseLT(), compressedLT()}, AffineMap(),
                      /*posWidth=*/64, getCrdWidth());
}

// Whether a row fits `width` depends on the values, and a width past the
// columns is the packer's error (it names the weight): checked when stored.
LogicalResult
ELLEncodingAttr::verifyShape(ArrayRef<int64_t> shape,
                             function_ref<InFlightDiagnostic()> emitError) const {
  if (shape.size() != 2)
    return emitError() << "encoding " << *this
                       << " needs a tensor of rank 2, got rank " << shape.size()
                       << " (shape " << shapeString(shape) << ")";
  return success();
}

// Hybrid ---------------------------------------------------------------------

LogicalResult
HybridEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           ArrayRef<EncodingAttrInterface> parts,
                           llvm::APFloat threshold) {
  if (parts.size() != 2)
    return emitError() << "hybrid needs exactly 2 parts, got " << parts.size();
  for (EncodingAttrInterface part : parts) {
    if (isa<DenseEncodingAttr>(part))
      return emitError() << "hybrid parts must be sparse formats, got "
                         << part << " (a dense part stores every value: "
                         << "use the dense format alone)";
    if (isa<HybridEncodingAttr>(part))
      return emitError() << "hybrid parts cannot be hybrid themselves, got "
                         << part;
  }
  if (parts[0] == parts[1])
    return emitError() << "hybrid parts must differ, got " << parts[0]
                       << " twice";
  // ELL takes each row's first nonzeros: the rest must be row-addressable.
  if (isa<ELLEncodingAttr>(parts[1]))
    return emitError() << "hybrid's ell part must be the first (it holds each "
                       << "row's first nonzeros, the second part the rest), got "
                       << parts[1] << " second";
  if (isa<ELLEncodingAttr>(parts[0]) &&
      !isa<COOEncodingAttr, CSREncodingAttr>(parts[1]))
    return emitError() << "hybrid's ell part needs a coo or csr second part "
                       << "for the rows' remaining nonzeros, got " << parts[1];
  double t = threshold.convertToDouble();
  if (!(t >= 0.0 && t <= 1.0)) // also rejects NaN
    return emitError() << "hybrid threshold must be in [0, 1], got "
                       << floatString(threshold);
  return success();
}

std::string HybridEncodingAttr::getFormatName() const {
  auto parts = getParts();
  return "hybrid(" + parts[0].getFormatName() + " + " +
         parts[1].getFormatName() + ")";
}

// No single upstream encoding: the parts are stored (and read) separately.
SparseTensorEncodingAttr HybridEncodingAttr::getSparseTensorEncoding(int64_t) const {
  return {};
}

// A shape both parts can store (the same tensor is split between them).
LogicalResult HybridEncodingAttr::verifyShape(
    ArrayRef<int64_t> shape,
    function_ref<InFlightDiagnostic()> emitError) const {
  for (EncodingAttrInterface part : getParts())
    if (failed(part.verifyShape(shape, emitError)))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Sparsifiers
//===----------------------------------------------------------------------===//

SparsifierKind KeepAllAttr::getKind() const { return SparsifierKind::Streaming; }
bool KeepAllAttr::needsOrdering() const { return false; }

SparsifierKind ThresholdAttr::getKind() const { return SparsifierKind::Streaming; }
bool ThresholdAttr::needsOrdering() const { return true; }

LogicalResult ThresholdAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    llvm::APFloat value) {
  if (value.isNaN())
    return emitError() << "threshold must not be NaN";
  if (value.isNegative() && !value.isZero())
    return emitError() << "threshold must be >= 0 (it is compared with |x|), got "
                       << floatString(value);
  return success();
}

SparsifierKind RandomFractionAttr::getKind() const {
  return SparsifierKind::Streaming;
}
bool RandomFractionAttr::needsOrdering() const { return false; }

LogicalResult
RandomFractionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           llvm::APFloat fraction, uint64_t) {
  return verifyFraction(emitError, fraction);
}

SparsifierKind ScalarFractionAttr::getKind() const {
  return SparsifierKind::Materializing;
}
bool ScalarFractionAttr::needsOrdering() const { return true; }

LogicalResult
ScalarFractionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           llvm::APFloat fraction) {
  return verifyFraction(emitError, fraction);
}

SparsifierKind BlockFractionAttr::getKind() const {
  return SparsifierKind::Materializing;
}
bool BlockFractionAttr::needsOrdering() const { return true; }

LogicalResult
BlockFractionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                          llvm::APFloat fraction, ArrayRef<int64_t> block) {
  return success(succeeded(verifyFraction(emitError, fraction)) &&
                 succeeded(verifyBlock(emitError, block)));
}

LogicalResult
BlockFractionAttr::verifyShape(ArrayRef<int64_t> shape,
                               function_ref<InFlightDiagnostic()> emitError) const {
  ArrayRef<int64_t> block = getBlock();
  if (block.size() > shape.size())
    return emitError() << "sparsifier " << *this << " has a " << block.size()
                       << "-d block but the tensor has rank " << shape.size();
  ArrayRef<int64_t> trailing = shape.take_back(block.size());
  for (auto [b, d] : llvm::zip(block, trailing))
    if (!divides(b, d))
      return emitError() << "sparsifier " << *this
                         << " needs its block to divide the trailing dimensions "
                            "of the shape "
                         << shapeString(shape);
  return success();
}

SparsifierKind NMMagnitudeAttr::getKind() const { return SparsifierKind::Blocking; }
bool NMMagnitudeAttr::needsOrdering() const { return true; }

LogicalResult
NMMagnitudeAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t n,
                        int64_t m, int64_t, bool transposable, int64_t rows) {
  if (failed(verifyNM(emitError, n, m)) ||
      failed(verifyRowsValue(emitError, rows)))
    return failure();
  if (transposable && rows != 1)
    return emitError() << "a transposable n:m pattern cannot be shared by "
                       << rows << " rows";
  return success();
}

LogicalResult
NMMagnitudeAttr::verifyShape(ArrayRef<int64_t> shape,
                             function_ref<InFlightDiagnostic()> emitError) const {
  int64_t rank = shape.size();
  int64_t dim = getDim();
  if (dim < -rank || dim >= rank)
    return emitError() << "sparsifier " << *this << " has dim = " << dim
                       << ", out of range for rank " << rank;
  if (getTransposable()) {
    if (rank != 2)
      return emitError() << "sparsifier " << *this
                         << " (transposable) needs a matrix, got rank " << rank;
    if (!divides(getM(), shape[0]) || !divides(getM(), shape[1]))
      return emitError() << "sparsifier " << *this << " needs m = " << getM()
                         << " to divide both dimensions, got shape "
                         << shapeString(shape);
    return success();
  }
  int64_t d = dim < 0 ? dim + rank : dim;
  if (!divides(getM(), shape[d]))
    return emitError() << "sparsifier " << *this << " needs m = " << getM()
                       << " to divide dimension " << d << ", got shape "
                       << shapeString(shape);
  if (getRows() != 1 && d != rank - 1)
    return emitError() << "sparsifier " << *this
                       << " shares patterns across rows: needs dim to be the "
                          "last dimension, got dim = "
                       << dim << " for rank " << rank;
  return verifyNMRows(emitError, *this, getRows(), shape);
}

