// Python view of the runtime: ISA tiers, the cap, thread pools.
#include <memory>

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
      .def(py::init([](int n) {
             if (n < 1 || n > 1024) throw ArgError("num_threads must be in [1, 1024]");
             return std::make_shared<ThreadPool>(n);
           }), py::arg("num_threads"))
      .def_property_readonly("num_threads", &ThreadPool::size)
      .def_property("solo", &ThreadPool::solo, &ThreadPool::set_solo,
                    "Whether the caller runs every job itself, the workers idle, split as for one thread (the "
                    "same results); set it only while no run holds the pool.")
      .def("bind", [](ThreadPool& p) { bind_pool(&p); },
           "Make this pool the one kernels called from this thread use.")
      .def_static("unbind", [] { bind_pool(nullptr); });
}

}  // namespace msv0
