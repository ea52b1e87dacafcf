// NativeOp's Python face, and Program: a run of consecutive native steps executed in one call
// from Python, so the per-node cost of a plan is a virtual call, not a trip through the
// interpreter. Both check arrays against the operands the op was built for, once.
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "runtime/bind.h"
#include "runtime/native.h"

namespace msv0 {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

// The data pointer of `a` after checking it against `want`: dtype, C-contiguity, exact shape,
// and writability for outputs.
void* operand_ptr(const py::handle& h, const Operand& want, bool output, const std::string& what) {
  if (!py::isinstance<py::array>(h)) throw ArgError(what + ": expected a NumPy array");
  auto a = py::reinterpret_borrow<py::array>(h);
  if (a.dtype().char_() != want.type)
    throw ArgError(what + ": expected dtype '" + std::string(1, want.type) + "', got '" +
                   std::string(1, a.dtype().char_()) + "'");
  if (!(a.flags() & py::array::c_style)) throw ArgError(what + ": not C-contiguous");
  if (output && !a.writeable()) throw ArgError(what + ": read-only");
  if (shape_of(a) != want.shape)
    throw ArgError(what + ": expected shape " + shape_str(want.shape) + ", got " + shape_str(shape_of(a)));
  return const_cast<void*>(a.data());
}

struct Bound {
  std::vector<const void*> in;
  std::vector<void*> out;
};

Bound bind_arrays(const NativeOp& op, const py::sequence& inputs, const py::sequence& outputs) {
  const std::string name = op.name();
  if (py::len(inputs) != op.inputs().size() || py::len(outputs) != op.outputs().size())
    throw ArgError(name + ": expected " + std::to_string(op.inputs().size()) + " input(s) and " +
                   std::to_string(op.outputs().size()) + " output(s)");
  Bound b;
  for (size_t i = 0; i < op.inputs().size(); ++i)
    b.in.push_back(operand_ptr(inputs[i], op.inputs()[i], false, name + " input " + std::to_string(i)));
  for (size_t i = 0; i < op.outputs().size(); ++i)
    b.out.push_back(operand_ptr(outputs[i], op.outputs()[i], true, name + " output " + std::to_string(i)));
  return b;
}

class Program {
 public:
  void add(std::shared_ptr<NativeOp> op, const py::list& inputs, const py::list& outputs) {
    Bound b = bind_arrays(*op, inputs, outputs);
    for (const auto& a : inputs) keep_.push_back(py::reinterpret_borrow<py::object>(a));
    for (const auto& a : outputs) keep_.push_back(py::reinterpret_borrow<py::object>(a));
    steps_.push_back(Step{std::move(op), std::move(b)});
  }

  void run() const {
    py::gil_scoped_release unlocked;
    for (const Step& s : steps_) s.op->run(s.args.in.data(), s.args.out.data());
  }

  // run() with each step's [start, end) in seconds from the call's start: a separate entry
  // point for profiles, so that run() itself reads no clock.
  std::vector<std::pair<double, double>> run_timed() const {
    using clock = std::chrono::steady_clock;
    std::vector<std::pair<double, double>> spans;
    spans.reserve(steps_.size());
    py::gil_scoped_release unlocked;
    const auto t0 = clock::now();
    for (const Step& s : steps_) {
      const auto a = clock::now();
      s.op->run(s.args.in.data(), s.args.out.data());
      const auto b = clock::now();
      spans.emplace_back(std::chrono::duration<double>(a - t0).count(), std::chrono::duration<double>(b - t0).count());
    }
    return spans;
  }

  size_t size() const { return steps_.size(); }

 private:
  struct Step {
    std::shared_ptr<NativeOp> op;
    Bound args;
  };
  std::vector<Step> steps_;
  std::vector<py::object> keep_;  // the arrays the pointers above point into
};

// Whether src is a C-ordered array of exactly dst's layout: the same dtype object (NumPy's
// built-in dtypes are singletons; a dtype of the other byte order is not) and shape, so that its
// bytes are dst's bytes.
bool same_layout(const py::handle& src, const py::array& dst) {
  if (!py::isinstance<py::array>(src)) return false;
  auto a = py::reinterpret_borrow<py::array>(src);
  if (a.dtype().ptr() != dst.dtype().ptr() || !(a.flags() & py::array::c_style) || a.ndim() != dst.ndim()) return false;
  for (py::ssize_t d = 0; d < a.ndim(); ++d)
    if (a.shape(d) != dst.shape(d)) return false;
  return true;
}

py::list shapes_of(const std::vector<Operand>& ops) {
  py::list r;
  for (const Operand& o : ops) r.append(py::tuple(py::cast(o.shape)));
  return r;
}

}  // namespace

MSV0_BIND(m) {
  // module.cc registers the class first, so that kernel files' binders can derive from it.
  py::class_<NativeOp, std::shared_ptr<NativeOp>> native(m.attr("NativeOp"));
  native
      .def("__call__", [](const NativeOp& op, const py::sequence& inputs, const py::sequence& outputs) {
             const Bound b = bind_arrays(op, inputs, outputs);
             py::gil_scoped_release unlocked;
             op.run(b.in.data(), b.out.data());
           }, py::arg("inputs"), py::arg("outputs"),
           "Run once on arrays of exactly the dtypes and shapes the op was built for (ValueError otherwise).")
      .def_property_readonly("name", &NativeOp::name)
      .def_property_readonly("input_shapes", [](const NativeOp& op) { return shapes_of(op.inputs()); })
      .def_property_readonly("output_shapes", [](const NativeOp& op) { return shapes_of(op.outputs()); });

  // A plan's input and output copies, one call each: a tiny model's run (a wake word's 10 ms
  // frame, 7 states in and out) spent a third of its time in a NumPy call per array.
  m.def("copy_in", [](const py::sequence& buffers, const py::sequence& arrays) {
    if (py::len(buffers) != py::len(arrays)) throw ArgError("copy_in: one array per buffer");
    py::object copyto;
    for (size_t i = 0; i < py::len(buffers); ++i) {
      const py::handle buffer = buffers[i];
      if (!py::isinstance<py::array>(buffer)) throw ArgError("copy_in: a buffer is not a NumPy array");
      auto dst = py::reinterpret_borrow<py::array>(buffer);
      if (!(dst.flags() & py::array::c_style) || !dst.writeable())
        throw ArgError("copy_in: a buffer is not C-contiguous and writable");
      const py::handle src = arrays[i];
      if (same_layout(src, dst)) {
        if (dst.nbytes()) std::memcpy(dst.mutable_data(), py::reinterpret_borrow<py::array>(src).data(),
                                      static_cast<size_t>(dst.nbytes()));
        continue;
      }
      if (!copyto) copyto = py::module_::import("numpy").attr("copyto");
      copyto(dst, src);  // strided, or of another type: NumPy's rules
    }
  }, py::arg("buffers"), py::arg("arrays"),
        "Copy each array into its buffer (a C-contiguous writable array of the same shape).");
  m.def("same_arrays", [](const py::sequence& buffers, const py::sequence& arrays) {
    if (py::len(buffers) != py::len(arrays)) return false;
    for (size_t i = 0; i < py::len(buffers); ++i)
      if (!same_layout(arrays[i], py::reinterpret_borrow<py::array>(buffers[i]))) return false;
    return true;
  }, py::arg("buffers"), py::arg("arrays"),
        "Whether each array is C-contiguous with its buffer's dtype (the same dtype object) and shape.");
  m.def("copies", [](const py::sequence& arrays) {
    py::list out;
    for (const py::handle h : arrays) {
      if (!py::isinstance<py::array>(h)) throw ArgError("copies: expected NumPy arrays");
      auto a = py::reinterpret_borrow<py::array>(h);
      if (!(a.flags() & py::array::c_style)) {
        out.append(a.attr("copy")());
        continue;
      }
      py::array c(a.dtype(), shape_of(a));
      if (a.nbytes()) std::memcpy(c.mutable_data(), a.data(), static_cast<size_t>(a.nbytes()));
      out.append(c);
    }
    return out;
  }, py::arg("arrays"), "Fresh C-contiguous copies of arrays.");

  py::class_<Program>(m, "Program", "Native steps run back to back with the GIL released.")
      .def(py::init<>())
      .def("add", &Program::add, py::arg("op"), py::arg("inputs"), py::arg("outputs"))
      .def("run", &Program::run)
      .def("run_timed", &Program::run_timed, "run(), returning each step's (start, end) in seconds from the call's start.")
      .def("__len__", &Program::size);
}

}  // namespace msv0
