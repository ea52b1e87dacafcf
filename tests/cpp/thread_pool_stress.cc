// Stress for ThreadPool (csrc/runtime/parallel.cc), built with -fsanitize=thread by
// tests/test_thread_pool.py: jobs of every size on pools of 2, 4 and 8 threads, with pauses that
// let workers fall asleep, more threads than CPUs so that workers are descheduled holding tasks
// and get benched. Every task's output is checked; exits 1 on a wrong or missing one.
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "runtime/parallel.h"

int main() {
  long bad = 0;
  for (int threads : {2, 4, 8}) {
    msv0::ThreadPool pool(threads);
    msv0::bind_pool(&pool);
    std::vector<int64_t> out(1000);
    for (int job = 0; job < 6000; ++job) {
      const int64_t n = 1 + job % 997;
      msv0::parallel_for(n, 1, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) {
          volatile double spin = 0;  // uneven tasks
          for (int k = 0; k < (job % 7) * 50; ++k) spin = spin + k;
          out[i] = i * 3 + job;
        }
      });
      for (int64_t i = 0; i < n; ++i) bad += out[i] != i * 3 + job;
      if (job % 2000 == 1999) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    msv0::bind_pool(nullptr);
  }
  std::printf("wrong outputs: %ld\n", bad);
  return bad != 0;
}
