// The msv0._core extension: registers the shared base types, then runs every MSV0_BIND in
// file-name order.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runtime/bind.h"
#include "runtime/native.h"

namespace msv0 {
namespace {
std::vector<std::pair<std::string, Binder>>& binders() {
  static std::vector<std::pair<std::string, Binder>> list;
  return list;
}
}  // namespace

int register_binder(const char* file, Binder fn) {
  binders().emplace_back(file, fn);
  return 0;
}

void run_binders(py::module_& m) {
  auto list = binders();
  std::stable_sort(list.begin(), list.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& b : list) b.second(m);
}
}  // namespace msv0

PYBIND11_MODULE(_core, m) {
  m.doc() = "msv0 native core: model loading and verification, kernels, threads";
  pybind11::register_exception<msv0::ArgError>(m, "KernelArgError", PyExc_ValueError);
  // The base of every kernel object, registered before the binders that derive from it.
  pybind11::class_<msv0::NativeOp, std::shared_ptr<msv0::NativeOp>>(
      m, "NativeOp", "A kernel with packed weights and fixed shapes, runnable in a Program.");
  msv0::run_binders(m);
}
