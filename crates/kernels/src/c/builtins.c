/*
 * Freestanding helpers that the compiler may call behind the kernel author's
 * back (struct copies, zero-initialisation, _Float16 conversions and
 * comparisons). Kernels are
 * linked without libc/libgcc, so these are linked into every image; unused
 * ones are dropped by --gc-sections.
 *
 * Compiled with -fno-tree-loop-distribute-patterns so the byte loops below are
 * not "optimised" back into calls to memcpy/memset (infinite recursion).
 */
#include <stddef.h>
#include <stdint.h>

#define SCENE_BUILTIN __attribute__((used))

SCENE_BUILTIN void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--) *d++ = *s++;
    return dst;
}

SCENE_BUILTIN void *memmove(void *dst, const void *src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (d == s || n == 0) return dst;
    /* Pointer comparison across objects is fine here: flat address space. */
    if ((uintptr_t)d < (uintptr_t)s) {
        while (n--) *d++ = *s++;
    } else {
        d += n;
        s += n;
        while (n--) *--d = *--s;
    }
    return dst;
}

SCENE_BUILTIN void *memset(void *dst, int c, size_t n) {
    unsigned char *d = dst;
    while (n--) *d++ = (unsigned char)c;
    return dst;
}

SCENE_BUILTIN int memcmp(const void *a, const void *b, size_t n) {
    const unsigned char *x = a;
    const unsigned char *y = b;
    for (; n; --n, ++x, ++y) {
        if (*x != *y) return (int)*x - (int)*y;
    }
    return 0;
}

#if defined(__FLT16_MAX__)
/* Bit-level conversions: any _Float16 arithmetic here would call ourselves. */
typedef union { _Float16 f; uint16_t u; } scene_h16;
typedef union { float f; uint32_t u; } scene_f32;
typedef union { double f; uint64_t u; } scene_f64;

static uint32_t scene_h_to_f_bits(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) return sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0);
    if (exp == 0) {
        if (man == 0) return sign;
        /* Subnormal half: normalise into a float exponent. */
        int e = -1;
        do { man <<= 1; ++e; } while ((man & 0x400u) == 0);
        man &= 0x3ffu;
        return sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
    }
    return sign | ((exp + 127 - 15) << 23) | (man << 13);
}

/*
 * Round a finite magnitude given as (unbiased exponent e, 1.mantissa with
 * `frac_bits` fraction bits in `m`, implicit bit included) to half precision,
 * round-to-nearest-even, handling overflow and subnormals.
 */
static uint16_t scene_round_to_h(uint16_t sign, int e, uint64_t m, int frac_bits) {
    if (e > 15) return sign | 0x7c00u;
    int shift; /* how many low bits of m to drop */
    uint16_t exp_field;
    if (e >= -14) {
        shift = frac_bits - 10;
        exp_field = (uint16_t)(e + 15);
    } else {
        shift = frac_bits - 10 + (-14 - e);
        exp_field = 0;
        if (shift > frac_bits + 1) return sign; /* below half the smallest subnormal */
    }
    uint64_t kept = m >> shift;
    uint64_t rem = m & ((1ull << shift) - 1);
    uint64_t halfway = 1ull << (shift - 1);
    if (rem > halfway || (rem == halfway && (kept & 1))) kept += 1;
    /* kept includes the implicit bit for normals; carries roll into the exponent. */
    uint32_t bits;
    if (exp_field) {
        bits = ((uint32_t)exp_field << 10) + (uint32_t)(kept - 0x400u);
    } else {
        bits = (uint32_t)kept; /* a carry to 0x400 is exactly the smallest normal */
    }
    if (bits >= 0x7c00u) return sign | 0x7c00u;
    return sign | (uint16_t)bits;
}

SCENE_BUILTIN float __extendhfsf2(_Float16 h) {
    scene_h16 in;
    scene_f32 out;
    in.f = h;
    out.u = scene_h_to_f_bits(in.u);
    return out.f;
}

SCENE_BUILTIN double __extendhfdf2(_Float16 h) {
    /* float -> double widening is exact and a single instruction. */
    return (double)__extendhfsf2(h);
}

SCENE_BUILTIN _Float16 __truncsfhf2(float f) {
    scene_f32 in;
    scene_h16 out;
    in.f = f;
    uint16_t sign = (uint16_t)((in.u >> 16) & 0x8000u);
    uint32_t exp = (in.u >> 23) & 0xffu;
    uint32_t man = in.u & 0x7fffffu;
    if (exp == 0xffu) {
        out.u = sign | 0x7c00u | (man ? (0x200u | (uint16_t)(man >> 13)) : 0);
        return out.f;
    }
    if (exp == 0) {
        out.u = sign; /* float subnormals are far below the half range */
        return out.f;
    }
    out.u = scene_round_to_h(sign, (int)exp - 127, (uint64_t)(man | 0x800000u), 23);
    return out.f;
}

SCENE_BUILTIN _Float16 __truncdfhf2(double d) {
    /* Direct from double bits: going through float would round twice. */
    scene_f64 in;
    scene_h16 out;
    in.f = d;
    uint16_t sign = (uint16_t)((in.u >> 48) & 0x8000u);
    uint32_t exp = (uint32_t)((in.u >> 52) & 0x7ffu);
    uint64_t man = in.u & 0xfffffffffffffull;
    if (exp == 0x7ffu) {
        out.u = sign | 0x7c00u | (man ? (0x200u | (uint16_t)(man >> 42)) : 0);
        return out.f;
    }
    if (exp == 0) {
        out.u = sign;
        return out.f;
    }
    out.u = scene_round_to_h(sign, (int)exp - 1023, man | (1ull << 52), 52);
    return out.f;
}

/* Comparisons of _Float16 values, with libgcc's results: 0 when equal,
 * -1 / 1 when less / greater, and `unordered` when either is a NaN. GCC
 * narrows a comparison of two widened halves back to half (`x != x` on a
 * float that came from a half, as in scene_logf's NaN test) and calls
 * these on targets without half compare instructions. On bits only. */
static int scene_h_cmp(_Float16 a, _Float16 b, int unordered) {
    scene_h16 x, y;
    x.f = a;
    y.f = b;
    uint16_t ax = x.u & 0x7fffu, ay = y.u & 0x7fffu;
    if (ax > 0x7c00u || ay > 0x7c00u) return unordered;
    if (ax == 0 && ay == 0) return 0; /* +0 == -0 */
    /* Sign-magnitude to a total order on the non-NaN values. */
    int32_t kx = (x.u & 0x8000u) ? -(int32_t)ax : (int32_t)ax;
    int32_t ky = (y.u & 0x8000u) ? -(int32_t)ay : (int32_t)ay;
    return (kx > ky) - (kx < ky);
}

SCENE_BUILTIN int __eqhf2(_Float16 a, _Float16 b) { return scene_h_cmp(a, b, 1); }
SCENE_BUILTIN int __nehf2(_Float16 a, _Float16 b) { return scene_h_cmp(a, b, 1); }
SCENE_BUILTIN int __lthf2(_Float16 a, _Float16 b) { return scene_h_cmp(a, b, 2); }
SCENE_BUILTIN int __lehf2(_Float16 a, _Float16 b) { return scene_h_cmp(a, b, 2); }
SCENE_BUILTIN int __gthf2(_Float16 a, _Float16 b) { return scene_h_cmp(a, b, -2); }
SCENE_BUILTIN int __gehf2(_Float16 a, _Float16 b) { return scene_h_cmp(a, b, -2); }
SCENE_BUILTIN int __unordhf2(_Float16 a, _Float16 b) {
    scene_h16 x, y;
    x.f = a;
    y.f = b;
    return (x.u & 0x7fffu) > 0x7c00u || (y.u & 0x7fffu) > 0x7c00u;
}
#endif
