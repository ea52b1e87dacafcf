// The msv0._core extension: runs every MSV0_BIND in file-name order; nothing else lives here.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runtime/bind.h"

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
  msv0::run_binders(m);
}
