"""An x86 tier's SGEMM at a git revision against the working tree's, alternating in one process.

    python bench/gemm_ab.py [rev, default HEAD] [MxNxK,... default 1024x1024x1024,3136x64x576] [runs, default 21]
                            [tier: avx512 (default) or avx2]

Prints median and upper-quartile GFLOP/s (thread CPU time) of each; compare with the FMA peak
from gemm_cpu_time.py. Both builds include the working tree's headers. Needs g++ and a CPU with
the tier.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = "csrc/kernels/gemm_f32.cc"
# Each tier's flags and index, as csrc/runtime/isa_tiers.def has them.
TIERS = {"avx2": (["-mavx2", "-mfma", "-mf16c"], 1),
         "avx512": (["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mfma", "-mf16c"], 2)}


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
    shapes = (sys.argv[2] if len(sys.argv) > 2 else "1024x1024x1024,3136x64x576").split(",")
    runs = sys.argv[3] if len(sys.argv) > 3 else "21"
    tier = sys.argv[4] if len(sys.argv) > 4 else "avx512"
    flags = ["-O3", "-DNDEBUG", "-std=gnu++17", *TIERS[tier][0], f"-DMSV0_ISA={tier}", f"-DMSV0_ISA_INDEX={TIERS[tier][1]}"]
    with tempfile.TemporaryDirectory() as d:
        old = os.path.join(d, "gemm_f32_old.cc")
        with open(old, "w") as f:
            f.write(subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{KERNEL}"], check=True, capture_output=True,
                                   text=True).stdout)
        inc = ["-I" + os.path.join(ROOT, "csrc")]
        # The old build keeps the kernel's names; the new one's functions and slot table are renamed.
        objs = {old: [], os.path.join(ROOT, KERNEL): ["-Dsgemm_f32_slots=sgemm_f32_slots_new", "-Dsgemm_f32=sgemm_f32_new",
                                                      "-Dsgemm_pack_b=sgemm_pack_b_new", "-Dsgemm_f32_fill=sgemm_f32_fill_new"]}
        for i, (src, extra) in enumerate(objs.items()):
            subprocess.run(["g++", *flags, *inc, *extra, "-c", src, "-o", os.path.join(d, f"{i}.o")], check=True)
        exe = os.path.join(d, "gemm_ab")
        subprocess.run(["g++", *flags, "-DMSV0_ONCE=0", *inc, os.path.join(ROOT, "bench/gemm_ab.cc"),
                        os.path.join(d, "0.o"), os.path.join(d, "1.o"), "-o", exe], check=True)
        for shape in shapes:
            subprocess.run([exe, *shape.split("x"), runs], check=True)


if __name__ == "__main__":
    main()
