// Python view of the runtime: ISA tiers, the cap, thread pools.
#include <memory>
#include <optional>

#include "runtime/bind.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace msv0 {

MSV0_BIND(m) {
  m.def("isa", [] { return std::string(isa_name(active_isa())); }, "The ISA tier kernels dispatch to now.");
  m.def("available_isas", [] {
    py::list out;
    for (int i = 0; i <= detected_isa(); ++i) out.append(isa_name(i));
    return py::tuple(out);
  }, "Tiers this CPU and OS can run, lowest first.");
  m.def("known_isas", [] {
    static const char* const kNames[] = {
#define MSV0_TIER(name, arch, flags, needs) #name,
#include "runtime/isa_tiers.def"
#undef MSV0_TIER
    };
    py::list out;
    for (const char* name : kNames) out.append(name);
    return py::tuple(out);
  }, "Every tier in runtime/isa_tiers.def, of every architecture, in table order.");
  m.def("set_isa", [](const std::string& name) {
    for (int i = 0; i < kIsaCount; ++i)
      if (name == isa_name(i)) {
        if (i > detected_isa()) throw ArgError("ISA '" + name + "' is not available on this CPU");
        set_isa_cap(i);
        return;
      }
    throw ArgError("unknown ISA '" + name + "'");
  }, "Cap dispatch at this tier (one of available_isas()).");
  m.def("amx_enabled", &amx_enabled, "Whether kernel objects built from now on may take an AMX slot.");
  m.def("set_amx", &set_amx_enabled, py::arg("on"),
        "Allow (default) or forbid the AMX slots of the bf16 and int8 GEMMs for kernel objects built from now\n"
        "on; forbidden, they take the tier's plain slot (tests and benchmarks of both).");

  py::class_<ThreadPool, std::shared_ptr<ThreadPool>>(m, "ThreadPool")
      .def(py::init([](int n, int spin_us) {
             if (n < 1 || n > 1024) throw ArgError("num_threads must be in [1, 1024]");
             if (spin_us < -1 || spin_us > 1000000) throw ArgError("spin_us must be in [0, 1000000], or -1");
             return std::make_shared<ThreadPool>(n, spin_us);
           }), py::arg("num_threads"), py::arg("spin_us") = -1,
           "spin_us: how long an idle thread polls before it sleeps (-1: MSV0_SPIN_US, else the default).")
      .def_property_readonly("num_threads", &ThreadPool::size)
      .def_property_readonly("spin_us", &ThreadPool::spin_us)
      .def_property_readonly("stats", [](const ThreadPool& p) {
             const ThreadPool::Stats s = p.stats();
             py::dict d;
             d["parallel"] = s.parallel;
             d["serial"] = s.serial;
             d["contended"] = s.contended;
             return d;
           }, "Jobs posted to the workers, jobs run serially while backing off, and parallel jobs judged contended.")
      .def("run", [](ThreadPool& p, int64_t tasks, const py::function& fn) {
             std::optional<py::error_already_set> error;  // a worker must not throw: kept, raised here
             {
               py::gil_scoped_release unlocked;
               p.run(tasks, [&](int64_t t) {
                 py::gil_scoped_acquire locked;
                 if (error) return;
                 try {
                   fn(t);
                 } catch (py::error_already_set& e) {
                   error = std::move(e);
                 }
               });
             }
             if (error) throw *error;
           }, py::arg("tasks"), py::arg("fn"), "Call fn(task) for task in range(tasks) on the pool (tests its policy).")
      .def("bind", [](ThreadPool& p) { bind_pool(&p); },
           "Make this pool the one kernels called from this thread use.")
      .def_static("unbind", [] { bind_pool(nullptr); });
}

}  // namespace msv0
