// Which CUDA kernel takes an F16 attention of head size 64 or 128 (Note
// [decode on tensor cores], kernels/cuda/flash_attn_dec.cu), checked on the
// host: for every query count from 1 to 4096 and the GQA ratios models use,
// exactly one of the tensor-core kernels applies (the decode kernel up to
// kDecMaxQueries rows, the prefill kernel above), and the heads the decode
// kernel groups share one K and one V head and fit a 16-row tile. Built by
// nvcc as a host program, so it runs in CI on a machine without a GPU. Prints
// "fa plan: ok" and exits 0, or names the first case that fails and exits 1.
#include <cstdio>

#include "kernels/cuda/flash_attn.cuh"

using standin::kernels::cuda::fa::FaArgs;
namespace fa = standin::kernels::cuda::fa;

namespace {

// An F16 cache of `heads_kv` heads shared by `ratio` query heads each, rows
// 16-byte aligned, nq query rows of head size d.
FaArgs args(int64_t d, int64_t nq, int64_t heads_kv, int64_t ratio) {
    alignas(16) static char buf[16];
    FaArgs p{};
    p.q = p.k = p.v = buf;
    p.D = p.DV = d;
    p.k_nb1 = p.v_nb1 = 2 * d;
    p.k_nb2 = p.v_nb2 = 2 * d * 4096;
    p.k_nb3 = p.v_nb3 = p.k_nb2 * heads_kv;
    p.nq = nq;
    p.nh = heads_kv * ratio;
    p.nq3 = 1;
    p.nkv = 4096;
    p.rk2 = p.rv2 = ratio;
    p.rk3 = p.rv3 = 1;
    return p;
}

} // namespace

int main() {
    bool ok = true;
    int cases = 0;
    for (int64_t d : {64, 128}) {
        for (int64_t ratio : {1, 2, 4, 5, 6, 8, 12, 16, 32}) {
            for (int64_t nq = 1; nq <= 4096 && ok; ++nq) {
                const FaArgs p = args(d, nq, 8, ratio);
                const int g = fa::dec_heads(p, true);
                const bool tc = fa::tc_applies(p, true);
                ++cases;
                if ((g > 0) == tc) {
                    std::printf("D %lld, %lld heads per K/V head, %lld query rows: %s\n", (long long) d,
                                (long long) ratio, (long long) nq, tc ? "both kernels apply" : "no kernel applies");
                    ok = false;
                } else if (g > 0 && (g > 16 || ratio % g != 0 || (nq <= fa::kDecMaxQueries) != (g > 0))) {
                    std::printf("D %lld, %lld heads per K/V head, %lld query rows: %d heads per block\n",
                                (long long) d, (long long) ratio, (long long) nq, g);
                    ok = false;
                }
            }
        }
    }
    // Neither takes what it cannot: other head sizes, F32 caches, unaligned rows.
    FaArgs p = args(96, 1, 8, 4);
    ok &= fa::dec_heads(p, true) == 0 && !fa::tc_applies(p, true);
    p = args(128, 1, 8, 4);
    ok &= fa::dec_heads(p, false) == 0;
    p.k_nb1 = 2 * 128 + 2;
    ok &= fa::dec_heads(p, true) == 0 && !fa::tc_applies(args(128, 64, 8, 4), false);
    std::printf(ok ? "fa plan: ok (%d cases)\n" : "fa plan: FAILED\n", cases);
    return ok ? 0 : 1;
}
