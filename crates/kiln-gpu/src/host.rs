//! Host-side planning shared by the kernels' callers: NTT pass plans, MSM
//! window sizes, density-bitmap ranks, scalar digit decomposition (the CPU
//! twin of cuda/msm.cuh's, used by the tests). Pure CPU code, tested on CI.

/// Largest NTT tile: 2^10 Fr elements (32 KiB of shared memory).
pub const NTT_TILE_LOG: u32 = 10;
/// Low index bits kept contiguous in tiles of the upper passes (coalescing).
pub const NTT_COALESCE_BITS: u32 = 3;

/// One NTT pass: radix-2 stages on global index bits [lo, lo+k), with the
/// t lowest bits kept as contiguous runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttPass {
    pub lo: u32,
    pub k: u32,
    pub t: u32,
}

/// Passes of a 2^log_n transform in DIT order (low bits first); DIF runs
/// them reversed. The first pass takes the low bits whole (tile of 2^10);
/// the rest are balanced over tiles of at most 2^(10-3) rows.
pub fn plan_passes(log_n: u32) -> Vec<NttPass> {
    if log_n == 0 {
        return vec![];
    }
    let k0 = log_n.min(NTT_TILE_LOG);
    let mut passes = vec![NttPass { lo: 0, k: k0, t: 0 }];
    let rest = log_n - k0;
    let per = NTT_TILE_LOG - NTT_COALESCE_BITS;
    let groups = rest.div_ceil(per);
    let mut lo = k0;
    for g in 0..groups {
        let k = rest / groups + u32::from(g < rest % groups);
        passes.push(NttPass { lo, k, t: NTT_COALESCE_BITS.min(lo) });
        lo += k;
    }
    passes
}

/// Signed c-bit windows covering 256 bits (scalars are < 2^255, so the last
/// window never carries out).
pub fn msm_windows(c: u32) -> u32 {
    256u32.div_ceil(c)
}

/// Sorted points each bucket-accumulation thread adds up one after another
/// (the default; `KILN_MSM_ACC_CHUNK` overrides it): short runs while there
/// are threads to spare, longer ones once the windows fill the device.
pub(crate) fn msm_acc_chunk(n: usize) -> usize {
    if n < 1 << 18 { 32 } else { 128 }
}

/// Buckets each reduction thread weighs and sums one after another (the
/// default; `KILN_MSM_REDUCE_RUN` overrides it).
pub(crate) fn msm_reduce_run(n: usize) -> usize {
    if n < 1 << 22 { 16 } else { 64 }
}

/// `KILN_MSM_WINDOW` (2..=20), read once: a window size that replaces
/// [`msm_window_bits`]'s choice for every MSM, to time the choice against
/// its neighbours with one binary. `None` when unset or out of range.
pub(crate) fn msm_window_override() -> Option<u32> {
    static W: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *W.get_or_init(|| std::env::var("KILN_MSM_WINDOW").ok().and_then(|v| v.parse::<u32>().ok()).filter(|c| (2..=20).contains(c)))
}

/// Window size for an MSM of n (non-trivial) scalars on a device with
/// `sm_count` multiprocessors, accumulation chunks of `acc_chunk` points:
/// minimizes the point additions, W * (n + 3B) (bucket accumulation plus
/// the running-sum reduction, B = 2^(c-1) buckets), inflated when W * B
/// bucket threads cannot fill the device, plus the top window's serial
/// chain where it is the longest one.
///
/// The top window holds only scalar bits [(W-1)c, 255) and a carry, so
/// about 2^(255-(W-1)c) buckets (1 when c divides 255) share all n points;
/// each such bucket spans n / (buckets * acc_chunk) accumulation chunks whose
/// partial sums one thread adds one after another (`bucket_fix`). Chains no
/// longer than the reduction's runs ([`msm_reduce_run`]) add nothing to the
/// critical path; past that, each serial addition costs about half a
/// device-full of parallel ones (H200: ~35 us against ~1 ns per parallel
/// addition). H200, G1 / G2 ms, random scalars (2026-12-03): 262,000
/// scalars at c = 14 (8 top buckets, chains of 1023) 44.1 / 88.2, at
/// c = 16 7.6 / 20.5; 2^23 at c = 19 (chains of 256) 118.8 / 413.0, at
/// c = 20 111.2 / 371.9; and where the chains are short the smaller window
/// stays faster (2^10: c = 12 3.8 / 6.6, c = 13 4.8 / 7.8; 2^17: c = 13
/// 5.7 / 14.5, c = 16 6.8 / 15.3).
pub fn msm_window_bits(n: usize, sm_count: u32, acc_chunk: usize) -> u32 {
    let fill = (sm_count.max(1) as f64) * 512.0;
    let free = msm_reduce_run(n) as f64;
    let mut best = (f64::MAX, 2);
    for c in 2..=20u32 {
        let w = msm_windows(c) as f64;
        let b = (1u64 << (c - 1)) as f64;
        let top_buckets = 2f64.powi((255 - (msm_windows(c) as i32 - 1) * c as i32).max(0));
        let chain = (n as f64 / (top_buckets * acc_chunk.max(1) as f64)).max(1.0);
        let cost = w * (n as f64 + 3.0 * b) * (fill / (w * b)).max(1.0) + (chain - free).max(0.0) * fill / 2.0;
        if cost < best.0 {
            best = (cost, c);
        }
    }
    best.1
}

/// Windows each pass of an MSM's bucket stage takes: as many as keep the
/// pass's buffers (`window_bytes` per window) within `cap` bytes, at least
/// one, spread evenly over the passes it needs. Fewer windows at a time
/// cost one more read of the scalars per pass; more cost device memory a
/// proof must keep free (a 2^27 MSM's sorted ranks and chunk partials take
/// about 1 GB per window).
pub fn msm_pass_windows(windows: usize, window_bytes: u64, cap: u64) -> usize {
    let windows = windows.max(1);
    let most = (cap / window_bytes.max(1)).clamp(1, windows as u64) as usize;
    windows.div_ceil(windows.div_ceil(most))
}

/// `KILN_MSM_PASS_BYTES`, read once: the bytes one bucket-stage pass may
/// allocate, in place of the device's share ([`crate::GpuDevice::msm_pass_bytes`]).
pub(crate) fn msm_pass_bytes_override() -> Option<u64> {
    static B: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *B.get_or_init(|| std::env::var("KILN_MSM_PASS_BYTES").ok().and_then(|v| v.parse::<u64>().ok()).filter(|&b| b > 0))
}

/// Popcount of all bitmap words below each word, and the total: point index
/// of scalar i is prefix[i/64] + popcount(word & below-bit mask).
pub fn bitmap_prefix(bitmap: &[u64]) -> (Vec<u32>, usize) {
    let mut prefix = Vec::with_capacity(bitmap.len());
    let mut total = 0usize;
    for w in bitmap {
        prefix.push(total as u32);
        total += w.count_ones() as usize;
    }
    (prefix, total)
}

/// Point index of scalar i under a bitmap, if it takes part.
pub fn bitmap_rank(bitmap: &[u64], prefix: &[u32], i: usize) -> Option<usize> {
    let word = bitmap[i / 64];
    let bit = i % 64;
    if (word >> bit) & 1 == 0 {
        return None;
    }
    Some(prefix[i / 64] as usize + (word & ((1u64 << bit) - 1)).count_ones() as usize)
}

/// Signed digits of a plain little-endian 256-bit integer in c-bit windows:
/// sum d_w 2^(c w) == s, |d_w| <= 2^(c-1). Mirrors window_digit in msm.cuh.
pub fn signed_digits(s: &[u64; 4], c: u32) -> Vec<i64> {
    signed_digits_in(s, c, 0..msm_windows(c))
}

/// The digits of `windows` alone, as one pass of an MSM's bucket stage
/// computes them: the carry runs up from window 0 first (`carry_into` in
/// msm.cuh), so a pass's digits are those of the whole decomposition.
pub fn signed_digits_in(s: &[u64; 4], c: u32, windows: std::ops::Range<u32>) -> Vec<i64> {
    let bit = |i: u32| -> u64 { if i >= 256 { 0 } else { (s[(i / 64) as usize] >> (i % 64)) & 1 } };
    let digit = |w: u32, carry: &mut i64| -> i64 {
        let raw = (0..c).fold(0i64, |acc, j| acc | ((bit(w * c + j) as i64) << j));
        let v = raw + *carry;
        if v > 1i64 << (c - 1) {
            *carry = 1;
            v - (1i64 << c)
        } else {
            *carry = 0;
            v
        }
    };
    let mut carry = 0i64;
    for w in 0..windows.start {
        digit(w, &mut carry);
    }
    windows.map(|w| digit(w, &mut carry)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_cover_every_bit_once() {
        for log_n in 0..=32 {
            let p = plan_passes(log_n);
            let mut next = 0;
            for pass in &p {
                assert_eq!(pass.lo, next);
                assert!(pass.k >= 1 && pass.k + pass.t <= NTT_TILE_LOG);
                assert!(pass.t <= pass.lo);
                next += pass.k;
            }
            assert_eq!(next, log_n);
        }
        assert_eq!(plan_passes(27).len(), 4);
    }

    #[test]
    fn msm_passes_cover_the_windows_within_the_cap() {
        for windows in 1..=40 {
            for window_bytes in [1u64, 7, 1000, 1 << 30] {
                for cap in [0u64, 1, 999, 1000, 4000, 13 << 30, u64::MAX] {
                    let per = msm_pass_windows(windows, window_bytes, cap);
                    assert!((1..=windows).contains(&per));
                    // Within the cap unless one window alone is over it.
                    assert!(per == 1 || per as u64 * window_bytes <= cap, "{windows} windows of {window_bytes} B, cap {cap}: {per}");
                    // As few passes as the cap allows.
                    let passes = windows.div_ceil(per);
                    let most = (cap / window_bytes).clamp(1, windows as u64) as usize;
                    assert_eq!(passes, windows.div_ceil(most));
                }
            }
        }
        // A 2^27 MSM (13 windows of ~0.94 GB) on an 80 GB card's 4 GB share.
        assert_eq!(msm_pass_windows(13, 940 << 20, 4 << 30), 4);
        assert_eq!(msm_pass_windows(13, 940 << 20, u64::MAX), 13);
    }

    #[test]
    fn window_bits_reasonable() {
        for log_n in 0..=27 {
            let c = msm_window_bits(1 << log_n, 132, msm_acc_chunk(1 << log_n));
            assert!((2..=20).contains(&c));
            assert!(msm_windows(c) * c >= 256);
        }
        assert!(msm_window_bits(1 << 26, 132, 128) >= 16);
    }

    /// No size gets a window whose top window leaves a few buckets with
    /// long serial chains (the 2^18 fault: c = 14, 8 top buckets).
    #[test]
    fn top_window_chains_stay_short() {
        for log_n in 0..=27 {
            let n = 1usize << log_n;
            let k = msm_acc_chunk(n);
            let c = msm_window_bits(n, 132, k);
            let top = (255 - (msm_windows(c) as i32 - 1) * c as i32).max(0);
            let chain = (n >> top.min(40)) / k;
            assert!(chain <= 64, "2^{log_n}: c = {c}, top window of {top} bits, chains of {chain}");
        }
        // The choices measured best on the H200 (see msm_window_bits).
        for (n, c) in [(1 << 10, 12), (1 << 17, 13), (262_000, 16), (1 << 23, 20)] {
            assert_eq!(msm_window_bits(n, 132, msm_acc_chunk(n)), c, "n = {n}");
        }
    }

    /// Every pass split of the windows sees the digits of the whole
    /// decomposition (the carry into a pass's first window included).
    #[test]
    fn a_pass_of_windows_has_the_whole_decompositions_digits() {
        let top = [u64::MAX, u64::MAX, u64::MAX, 0x7fffffffffffffff];
        let carries = [0x8000800080008000u64, 0xffff0000ffff0000, 0x8000800080008000, 0x0000800080008000];
        for s in [[0u64; 4], [1, 0, 0, 0], top, carries, [0x9e3779b97f4a7c15, 0xf39cc0605cedc834, 0x1082276bf3a27251, 0x5bd1e995]] {
            for c in [2, 5, 13, 16, 20] {
                let all = signed_digits(&s, c);
                let w = all.len() as u32;
                for pass in 1..=w {
                    for first in (0..w).step_by(pass as usize) {
                        let range = first..(first + pass).min(w);
                        assert_eq!(signed_digits_in(&s, c, range.clone()), all[range.start as usize..range.end as usize], "c = {c}, windows {range:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn digits_recompose() {
        let r_minus_1 = [0xffffffff00000000u64, 0x53bda402fffe5bfe, 0x3339d80809a1d805, 0x73eda753299d7d48];
        let mut x = 0x9e3779b97f4a7c15u64;
        let mut cases = vec![[0u64; 4], [1, 0, 0, 0], r_minus_1, [u64::MAX, u64::MAX, u64::MAX, 0x7fffffffffffffff]];
        for _ in 0..50 {
            let mut s = [0u64; 4];
            for l in &mut s {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *l = x;
            }
            s[3] &= 0x7fffffffffffffff;
            cases.push(s);
        }
        for s in cases {
            for c in [2, 5, 13, 16, 20] {
                let d = signed_digits(&s, c);
                // Recompose as i128 chunks: sum d_w 2^(cw) as a 320-bit value.
                let mut acc = [0i128; 5]; // base 2^64 with signed carries
                for (w, &dw) in d.iter().enumerate() {
                    assert!(dw.abs() <= 1 << (c - 1));
                    let sh = w as u32 * c;
                    let v = (dw as i128) << (sh % 64);
                    acc[(sh / 64) as usize] += v;
                }
                let mut out = [0u64; 5];
                let mut carry = 0i128;
                for i in 0..5 {
                    let t = acc[i] + carry;
                    out[i] = t as u64;
                    carry = t >> 64;
                }
                assert_eq!(carry, 0);
                assert_eq!(&out[..4], &s[..]);
                assert_eq!(out[4], 0);
            }
        }
    }

    #[test]
    fn bitmap_ranks() {
        let bm = vec![0b1011u64, 0, u64::MAX, 1 << 63];
        let (prefix, total) = bitmap_prefix(&bm);
        assert_eq!(prefix, vec![0, 3, 3, 67]);
        assert_eq!(total, 68);
        assert_eq!(bitmap_rank(&bm, &prefix, 0), Some(0));
        assert_eq!(bitmap_rank(&bm, &prefix, 2), None);
        assert_eq!(bitmap_rank(&bm, &prefix, 3), Some(2));
        assert_eq!(bitmap_rank(&bm, &prefix, 130), Some(5));
        assert_eq!(bitmap_rank(&bm, &prefix, 255), Some(67));
        let empty = bitmap_prefix(&[0, 0]);
        assert_eq!(empty, (vec![0, 0], 0));
    }
}
