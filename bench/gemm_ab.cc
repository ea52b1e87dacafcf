// Two builds of an x86 tier's SGEMM (csrc/kernels/gemm_f32.cc at a git revision, "old", and as in
// the working tree, "new") in one process, timed alternately on the same operands. On a machine
// shared with other jobs, separate runs of each drift by 20-30 %; alternating calls see the same
// load, so a few percent between two kernel versions shows. Built and run by bench/gemm_ab.py.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "kernels/gemm_f32.h"
#include "runtime/dispatch.h"

namespace msv0 {
// The slot tables the two kernel objects fill, and their fillers (the new one's renamed by the
// build), as MSV0_DECLARE's binding pass defines them.
KernelSlots<SgemmConfig>& sgemm_f32_slots() {
  static KernelSlots<SgemmConfig> s;
  return s;
}
KernelSlots<SgemmConfig>& sgemm_f32_slots_new() {
  static KernelSlots<SgemmConfig> s;
  return s;
}
bool sgemm_f32_fill(int isa, const SgemmConfig& entry) {
  sgemm_f32_slots().entry[isa] = entry;
  return true;
}
bool sgemm_f32_fill_new(int isa, const SgemmConfig& entry) {
  sgemm_f32_slots_new().entry[isa] = entry;
  return true;
}
}  // namespace msv0

static double now() {  // thread CPU time, as gemm_cpu_time.py
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  using namespace msv0;
  if (argc < 5) return 2;
  const int64_t m = atol(argv[1]), n = atol(argv[2]), k = atol(argv[3]);
  const int runs = atoi(argv[4]), isa = MSV0_ISA_INDEX;  // the tier both objects were built for
  const SgemmConfig* cfg[2] = {&sgemm_f32_slots().entry[isa], &sgemm_f32_slots_new().entry[isa]};
  std::vector<float> a(m * k), b(k * n), c(m * n), ref(m * n), packed[2];
  for (auto& x : a) x = rand() / float(RAND_MAX) - .5f;
  for (auto& x : b) x = rand() / float(RAND_MAX) - .5f;
  std::vector<double> times[2];
  for (int v = 0; v < 2; ++v) {
    packed[v].resize(sgemm_packed_size(n, k));
    cfg[v]->pack(b.data(), n, false, n, k, packed[v].data());
  }
  auto run = [&](int v) {
    const GemmArgs g{a.data(), k, packed[v].data(), nullptr, c.data(), n, m, n, k, -INFINITY, INFINITY};
    cfg[v]->fn(g, 0, m, 0, (n + kGemmNr - 1) / kGemmNr);
  };
  run(0);
  ref = c;
  run(1);
  for (int64_t i = 0; i < m * n; ++i)
    if (std::abs(c[i] - ref[i]) > 1e-3f * (1 + std::abs(ref[i]))) {
      printf("%ldx%ldx%ld: old and new differ at %ld\n", m, n, k, i);
      return 1;
    }
  for (int r = 0; r < runs; ++r)
    for (int v = 0; v < 2; ++v) {
      run(v);  // the same operands warm in cache for both
      const double t = now();
      run(v);
      times[v].push_back(now() - t);
    }
  printf("%ldx%ldx%ld GFLOP/s", m, n, k);
  for (int v = 0; v < 2; ++v) {
    std::sort(times[v].begin(), times[v].end());
    const auto rate = [&](double t) { return 2.0 * m * n * k / t / 1e9; };
    printf("  %s: median %.1f, quartile %.1f", v ? "new" : "old", rate(times[v][runs / 2]), rate(times[v][runs / 4]));
  }
  printf("\n");
}
