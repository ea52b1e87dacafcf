// Program: a run of consecutive native steps executed in one call from Python, so the
// per-node cost of a plan is a virtual call, not a trip through the interpreter.
#include <memory>
#include <vector>

#include "runtime/bind.h"
#include "runtime/native.h"

namespace msv0 {
namespace {

class Program {
 public:
  void add(std::shared_ptr<NativeOp> op, const py::list& inputs, const py::list& outputs) {
    Step s{std::move(op), {}, {}};
    for (const auto& a : inputs) {
      auto arr = py::reinterpret_borrow<py::array>(a);
      if (!(arr.flags() & py::array::c_style)) throw ArgError("program input is not C-contiguous");
      s.in.push_back(arr.data());
      keep_.push_back(arr);
    }
    for (const auto& a : outputs) {
      auto arr = py::reinterpret_borrow<py::array>(a);
      if (!arr.writeable() || !(arr.flags() & py::array::c_style))
        throw ArgError("program output is not a writable C-contiguous array");
      s.out.push_back(arr.mutable_data());
      keep_.push_back(arr);
    }
    steps_.push_back(std::move(s));
  }

  void run() const {
    py::gil_scoped_release unlocked;
    for (const Step& s : steps_) s.op->run(s.in.data(), s.out.data());
  }

  size_t size() const { return steps_.size(); }

 private:
  struct Step {
    std::shared_ptr<NativeOp> op;
    std::vector<const void*> in;
    std::vector<void*> out;
  };
  std::vector<Step> steps_;
  std::vector<py::array> keep_;  // the buffers the pointers above point into
};

}  // namespace

MSV0_BIND(m) {
  py::class_<Program>(m, "Program", "Native steps run back to back with the GIL released.")
      .def(py::init<>())
      .def("add", &Program::add, py::arg("op"), py::arg("inputs"), py::arg("outputs"))
      .def("run", &Program::run)
      .def("__len__", &Program::size);
}

}  // namespace msv0
