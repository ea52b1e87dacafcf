/* Measured single-core fp32 FMA peak: 12 independent accumulator chains (enough to cover FMA
 * latency x throughput on current x86 cores), 256-bit and 512-bit. Prints GFLOP/s per width,
 * the bf16 peak of 512-bit vdpbf16ps where the CPU has AVX512_BF16, and the int8 peaks in GOP/s
 * (a multiply and an add per byte pair) of 512-bit vpdpbusd where the CPU has AVX512_VNNI and of
 * AMX tdpbssd where it has AMX-INT8 and Linux grants the tiles.
 * Built and run by bench/bench_gemm.py and bench/gemm_s8_cpu_time.py;
 * standalone: cc -O2 -mavx512f -mfma fma_peak.c. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* Thread CPU time, not wall clock: on a machine shared with other jobs the time this thread
 * spends descheduled would lower the peak (gemm_cpu_time.py times the GEMMs the same way). */
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#define CHAINS(T, FMA, SET)                                                     \
  /* distinct starting values, or the compiler merges identical chains into one */      \
  T a0 = SET(1.f), a1 = SET(1.01f), a2 = SET(1.02f), a3 = SET(1.03f), a4 = SET(1.04f),   \
    a5 = SET(1.05f), a6 = SET(1.06f), a7 = SET(1.07f), a8 = SET(1.08f), a9 = SET(1.09f),  \
    a10 = SET(1.1f), a11 = SET(1.11f), m = SET(0.999999f), c = SET(1e-7f);                \
  for (long i = 0; i < iters; ++i) {                                            \
    a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c); \
    a4 = FMA(a4, m, c); a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c); \
    a8 = FMA(a8, m, c); a9 = FMA(a9, m, c); a10 = FMA(a10, m, c); a11 = FMA(a11, m, c); \
  }

static float sink;

static double peak256(long iters) {
  double t = now();
  CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps)
  t = now() - t;
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  sink += _mm256_cvtss_f32(s);
  return iters * 12.0 * 8 * 2 / t / 1e9;
}

static double peak512(long iters) {
  double t = now();
  CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps)
  t = now() - t;
  __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  sink += _mm512_reduce_add_ps(s);
  return iters * 12.0 * 16 * 2 / t / 1e9;
}

/* Twelve chains of a 512-bit dot-product instruction, each compiled for its extension alone,
 * so the rest of the program runs on CPUs without it. The instructions are spelled in asm: GCC
 * copies the accumulator of each _mm512_dpbusd_epi32 in this loop through another register,
 * and those moves would share the vector ports. T, SET, ADD, REDUCE: the accumulators' type,
 * splat, add and horizontal sum; U, S: the operands; OPS: what one instruction counts for. */
#define DOT(INSN, acc) __asm__(INSN " %[s], %[u], %[a]" : [a] "+v"(acc) : [u] "v"(u), [s] "v"(s))
#define DOT_PEAK(NAME, TARGET, INSN, T, SET, ADD, REDUCE, U, S, OPS)                               \
  __attribute__((target(TARGET))) static double NAME(long iters) {                                \
    T a0 = SET(0), a1 = SET(1), a2 = SET(2), a3 = SET(3), a4 = SET(4), a5 = SET(5), a6 = SET(6),   \
      a7 = SET(7), a8 = SET(8), a9 = SET(9), a10 = SET(10), a11 = SET(11);                         \
    const T u = U, s = S;                                                                          \
    double t = now();                                                                              \
    for (long i = 0; i < iters; ++i) {                                                             \
      DOT(INSN, a0); DOT(INSN, a1); DOT(INSN, a2); DOT(INSN, a3); DOT(INSN, a4); DOT(INSN, a5);    \
      DOT(INSN, a6); DOT(INSN, a7); DOT(INSN, a8); DOT(INSN, a9); DOT(INSN, a10); DOT(INSN, a11);  \
    }                                                                                              \
    t = now() - t;                                                                                 \
    T sum = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                     \
    sum = ADD(sum, ADD(ADD(a8, a9), ADD(a10, a11)));                                               \
    sink += (float)REDUCE(sum);                                                                    \
    return iters * 12.0 * (OPS) / t / 1e9;                                                         \
  }
/* vpdpbusd: 64 byte products summed into 16 int32 lanes, a multiply and an add each. */
DOT_PEAK(peak_vnni, "avx512f,avx512vnni", "vpdpbusd", __m512i, _mm512_set1_epi32, _mm512_add_epi32,
         _mm512_reduce_add_epi32, _mm512_set1_epi8(3), _mm512_set1_epi8(-2), 64 * 2)
/* vdpbf16ps: 32 bf16 products summed into 16 floats, four flops per lane. */
DOT_PEAK(peak_bf16, "avx512f,avx512bf16", "vdpbf16ps", __m512, _mm512_set1_ps, _mm512_add_ps, _mm512_reduce_add_ps,
         _mm512_set1_ps(1e-9f), _mm512_set1_ps(1e-9f), 16 * 4)

/* Four independent tile accumulators, as an AMX GEMM's 2 x 2 block of C; each tdpbssd is a
 * 16 x 16 x 64 product. ldtilecfg zeroes the tiles, so the operands are whatever zeros. */
#define DPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
__attribute__((target("amx-tile,amx-int8"))) static double peak_amx(long iters) {
  struct {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
  } cfg = {1};
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  double t = now();
  for (long i = 0; i < iters; ++i) {
    DPBSSD(0, 4, 6); DPBSSD(1, 4, 7); DPBSSD(2, 5, 6); DPBSSD(3, 5, 7);
  }
  t = now() - t;
  _tile_release();
  return iters * 4.0 * 16 * 16 * 64 * 2 / t / 1e9;
}

/* CPUID leaf 7 EDX: AMX-TILE (bit 24) and AMX-INT8 (bit 25); then Linux's permission for the
 * tile data (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), as msv0 asks for it. */
static int amx_int8_usable(void) {
#if defined(__linux__)
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  return (d & (1u << 24)) && (d & (1u << 25)) && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
  return 0;
#endif
}

/* The best of five runs of peak(iters), printed under name. */
static void report(const char* name, double (*peak)(long), long iters) {
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    double v = peak(iters);
    if (v > best) best = v;
  }
  printf("%s %.1f\n", name, best);
}

int main(int argc, char** argv) {
  const long iters = 50000000;
  double best256 = 0, best512 = 0;
  for (int r = 0; r < 5; ++r) {
    double a = peak256(iters), b = argc > 1 ? 0 : peak512(iters);
    if (a > best256) best256 = a;
    if (b > best512) best512 = b;
  }
  printf("avx2 %.1f\navx512 %.1f\n", best256, best512);
  if (argc == 1 && __builtin_cpu_supports("avx512vnni")) report("avx512vnni", peak_vnni, iters);
  if (argc == 1 && __builtin_cpu_supports("avx512bf16")) report("avx512bf16", peak_bf16, iters);
  if (argc == 1 && amx_int8_usable()) report("amx", peak_amx, iters / 10);
  return sink == 12345.f;
}
