# lit configuration for sparse_mlir's IR tests (run through sparse-mlir-opt).
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "SPARSE_MLIR"
# The external shell form raises with the lit package from PyPI.
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.sparse_mlir_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "python"]

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(
    ["sparse-mlir-opt"], [config.sparse_mlir_tools_dir, config.llvm_tools_dir]
)
