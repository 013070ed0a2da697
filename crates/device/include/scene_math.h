/*
 * scene_math.h - the kernel math library: float functions without libm.
 *
 * Included by scene_kernel.h; usable on its own from C and C++. Every
 * function is `static inline`, freestanding (no libm, no libc, no calls the
 * compiler could turn into libm calls), and uses no tables of pointers
 * (constants are immediates or .rodata, which the link script folds into
 * the image). powf and geluf evaluate in double internally.
 *
 * Measured maximum errors against host libm (docs/scene-format.md, "Kernel
 * math library"; crates/device/tests/math.rs asserts the bounds):
 * fabsf, fminf, fmaxf, floorf, ceilf, sqrtf exact; rsqrtf, expf, logf,
 * tanhf, sigmoidf, siluf, erff, powf, geluf within a few ulps on normal
 * results. IEEE special values (NaN, +-inf, +-0, denormals) follow C99
 * Annex F as libm does.
 */
#ifndef SCENE_MATH_H
#define SCENE_MATH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef union { float f; uint32_t u; } scene_math__f32;
typedef union { double f; uint64_t u; } scene_math__f64;

static inline uint32_t scene_math__bits(float x) {
    scene_math__f32 v;
    v.f = x;
    return v.u;
}

static inline float scene_math__float(uint32_t u) {
    scene_math__f32 v;
    v.u = u;
    return v.f;
}

static inline float scene_fabsf(float x) { return scene_math__float(scene_math__bits(x) & 0x7fffffffu); }

/* fmin/fmax: a NaN argument loses to a number; -0 < +0. */
static inline float scene_fminf(float x, float y) {
    if (x != x) return y;
    if (y != y) return x;
    if (x == y) return (scene_math__bits(x) >> 31) ? x : y;
    return x < y ? x : y;
}

static inline float scene_fmaxf(float x, float y) {
    if (x != x) return y;
    if (y != y) return x;
    if (x == y) return (scene_math__bits(x) >> 31) ? y : x;
    return x > y ? x : y;
}

static inline float scene_floorf(float x) {
    uint32_t u = scene_math__bits(x), a = u & 0x7fffffffu;
    if (a >= 0x4b000000u) return a > 0x7f800000u ? x + x : x; /* integral, inf, NaN */
    if (a < 0x3f800000u) {                                     /* |x| < 1 */
        if (a == 0) return x;
        return (u >> 31) ? -1.0f : 0.0f;
    }
    float t = (float)(int32_t)x;
    return t > x ? t - 1.0f : t;
}

static inline float scene_ceilf(float x) {
    uint32_t u = scene_math__bits(x), a = u & 0x7fffffffu;
    if (a >= 0x4b000000u) return a > 0x7f800000u ? x + x : x;
    if (a < 0x3f800000u) {
        if (a == 0) return x;
        return (u >> 31) ? -0.0f : 1.0f;
    }
    float t = (float)(int32_t)x;
    return t < x ? t + 1.0f : t;
}

/* One instruction. With -fno-math-errno (the kernel toolchain's flag) the
 * builtin never calls libm; without it, the instruction is spelled out so
 * that no errno path calls sqrtf. */
static inline float scene_sqrtf(float x) {
#if defined(__NO_MATH_ERRNO__)
    return __builtin_sqrtf(x);
#elif defined(__x86_64__) || (defined(__i386__) && defined(__SSE__))
    float r;
    __asm__("sqrtss %1, %0" : "=x"(r) : "x"(x));
    return r;
#elif defined(__aarch64__)
    float r;
    __asm__("fsqrt %s0, %s1" : "=w"(r) : "w"(x));
    return r;
#else
    return __builtin_sqrtf(x); /* build with -fno-math-errno */
#endif
}

static inline float scene_rsqrtf(float x) { return 1.0f / scene_sqrtf(x); }

/* p * 2^k for p in [0.5, 2] and -151 <= k <= 128, rounding once. */
static inline float scene_math__scale(float p, int k) {
    if (k > 127) return p * 2.0f * scene_math__float((uint32_t)(k - 1 + 127) << 23);
    if (k < -126) /* p * 2^(k+126) is exact and normal; one rounding into the subnormals */
        return p * scene_math__float((uint32_t)(k + 126 + 127) << 23) * 1.17549435082228750797e-38f;
    return p * scene_math__float((uint32_t)(k + 127) << 23);
}

/* exp: k = round(x / ln2), r = x - k ln2 (Cody-Waite, two-part ln2),
 * degree-7 Taylor polynomial on |r| <= ln2/2, then scale by 2^k. */
static inline float scene_expf(float x) {
    if (x != x) return x + x;
    if (x > 88.72283935546875f) return __builtin_inff();
    if (x < -103.972084045410156f) return 0.0f;
    float t = x * 1.44269504088896341f;
    int k = (int)(t + (t >= 0.0f ? 0.5f : -0.5f)); /* round to nearest, no libm */
    float kf = (float)k;
    float r = (x - kf * 0.693145751953125f) - kf * 1.42860682030941723212e-6f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 +
                                                                            r * (1.0f / 720 + r * (1.0f / 5040)))))));
    return scene_math__scale(p, k);
}

/* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), s = (m-1)/(m+1),
 * log(m) = 2 atanh(s) as in fdlibm's logf, plus e ln2 in two parts. */
static inline float scene_logf(float x) {
    uint32_t u = scene_math__bits(x);
    if (x != x) return x + x;
    if ((u & 0x7fffffffu) == 0) return -__builtin_inff();
    if (u >> 31) return __builtin_nanf("");
    if (u == 0x7f800000u) return x;
    int e = 0;
    if (u < 0x00800000u) { /* subnormal: scale into the normals */
        u = scene_math__bits(x * 33554432.0f);
        e = -25;
    }
    e += (int)(u >> 23) - 127;
    float m = scene_math__float((u & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356237f) {
        m *= 0.5f;
        e += 1;
    }
    float f = m - 1.0f;
    float s = f / (2.0f + f);
    float z = s * s;
    float hfsq = 0.5f * f * f;
    float R = z * (2.0f / 3 + z * (2.0f / 5 + z * (2.0f / 7 + z * (2.0f / 9 + z * (2.0f / 11)))));
    float logm = f - (hfsq - s * (hfsq + R));
    float ef = (float)e;
    return ef * 0.693145751953125f + (logm + ef * 1.42860682030941723212e-6f);
}

/* Double-precision log and exp for the functions whose argument error
 * would otherwise be amplified (powf, geluf). log_d: x > 0 and finite. */
static inline double scene_math__log_d(double x) {
    scene_math__f64 v;
    v.f = x;
    int e = (int)(v.u >> 52) - 1023;
    v.u = (v.u & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m = v.f;
    if (m > 1.41421356237309504880) {
        m *= 0.5;
        e += 1;
    }
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double hfsq = 0.5 * f * f;
    double R = z * (2.0 / 3 + z * (2.0 / 5 + z * (2.0 / 7 + z * (2.0 / 9 + z * (2.0 / 11 + z * (2.0 / 13 +
               z * (2.0 / 15 + z * (2.0 / 17 + z * (2.0 / 19 + z * (2.0 / 21 + z * (2.0 / 23)))))))))));
    double logm = f - (hfsq - s * (hfsq + R));
    return e * 6.93147180369123816490e-01 + (logm + e * 1.90821492927058770002e-10);
}

/* exp_d for -120 <= t <= 100 (what float results need). */
static inline double scene_math__exp_d(double t) {
    double kt = t * 1.44269504088896338700;
    int k = (int)(kt + (kt >= 0.0 ? 0.5 : -0.5));
    double r = (t - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
    double p = 1.0 + r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (1.0 / 720 +
               r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (1.0 / 3628800 +
               r * (1.0 / 39916800 + r * (1.0 / 479001600 + r * (1.0 / 6227020800.0)))))))))))));
    scene_math__f64 s;
    s.u = (uint64_t)(k + 1023) << 52;
    return p * s.f;
}

/* tanh: odd Taylor series below 0.55, 1 - 2/(e^2|x| + 1) above. */
static inline float scene_tanhf(float x) {
    if (x != x) return x + x;
    float a = scene_fabsf(x);
    if (a < 0.55f) {
        if (a < 1.220703125e-4f) return x; /* 2^-13: x^3/3 is below half an ulp; keeps -0 */
        float z = x * x;
        /* Taylor series of (tanh(x)/x - 1) / z, z = x^2 */
        float p = -3.3333333333e-1f + z * (1.3333333333e-1f + z * (-5.3968253968e-2f +
                  z * (2.1869488536e-2f + z * (-8.8632355299e-3f + z * (3.5921280366e-3f +
                  z * (-1.4558343871e-3f + z * (5.9002744095e-4f +
                  z * (-2.3912911424e-4f))))))));
        return x + x * z * p;
    }
    float r = a > 9.1f ? 1.0f : 1.0f - 2.0f / (scene_expf(2.0f * a) + 1.0f);
    return x < 0.0f ? -r : r;
}

/* sigmoid(x) = 1 / (1 + e^-x); below -87, e^-x overflows and
 * sigmoid(x) = e^x (1 + e^x rounds to 1). */
static inline float scene_sigmoidf(float x) {
    if (x != x) return x + x;
    if (x < -87.0f) return scene_expf(x);
    return 1.0f / (1.0f + scene_expf(-x));
}

/* silu(x) = x sigmoid(x) = x / (1 + e^-x). Below -80, x e^x in double: e^x
 * alone would be a subnormal float that has lost the digits x multiplies. */
static inline float scene_siluf(float x) {
    if (x != x) return x + x;
    if (x < -110.0f) return -0.0f; /* |x| e^x < 2^-150 */
    if (x < -80.0f) return (float)((double)x * scene_math__exp_d((double)x));
    return x / (1.0f + scene_expf(-x));
}

/* erf: Taylor series for |x| < 1; above, 1 - erfc with the Chebyshev fit of
 * Numerical Recipes' erfcc (relative error < 1.2e-7 on erfc). */
static inline float scene_erff(float x) {
    if (x != x) return x + x;
    float a = scene_fabsf(x);
    if (a < 1.0f) {
        float z = x * x;
        /* erf(x) = x * k * (1 + z q), k = 2/sqrt(pi), as x + x c with the
         * small c = (k - 1) + k z q, so k's rounding does not reach the result. */
        /* (-1)^n / (n! (2n+1)), n >= 1 */
        float q = -3.3333333333e-1f + z * (1.0000000000e-1f + z * (-2.3809523810e-2f +
                  z * (4.6296296296e-3f + z * (-7.5757575758e-4f + z * (1.0683760684e-4f +
                  z * (-1.3227513228e-5f + z * (1.4589169001e-6f + z * (-1.4503852223e-7f +
                  z * (1.3122532964e-8f + z * (-1.0892221037e-9f))))))))));
        float c = 0.12837916709551257f + 1.12837916709551257f * (z * q);
        return x + x * c;
    }
    float r = 1.0f;
    if (a < 4.0f) {
        float t = 1.0f / (1.0f + 0.5f * a);
        float erfc = t * scene_expf(-a * a - 1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f +
                     t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f +
                     t * (-0.82215223f + t * 0.17087277f)))))))));
        r = 1.0f - erfc;
    }
    return x < 0.0f ? -r : r;
}

/* gelu, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 * evaluated as x / (1 + e^(-2u)) (the same function, no cancellation). */
static inline float scene_geluf(float x) {
    if (x != x) return x + x;
    if (x > 10.0f) return x; /* e^(-2u) < 2^-60: x / (1 + e^(-2u)) rounds to x */
    double xd = x;
    double u = 0.79788456080286535588 * (xd + 0.044715 * xd * xd * xd);
    if (u < -55.0) return -0.0f; /* |x| e^(2u) < 2^-150 for these x: rounds to -0 */
    return (float)(xd / (1.0 + scene_math__exp_d(-2.0 * u)));
}

/* Is the float y an odd integer? */
static inline int scene_math__odd(float y) {
    float a = scene_fabsf(y);
    if (a >= 16777216.0f || a < 1.0f) return 0; /* every float >= 2^24 is even */
    int32_t i = (int32_t)a;
    return (float)i == a && (i & 1);
}

/* pow with C99 Annex F special cases; exp(y log x) in double. */
static inline float scene_powf(float x, float y) {
    uint32_t ux = scene_math__bits(x), uy = scene_math__bits(y);
    uint32_t ax = ux & 0x7fffffffu, ay = uy & 0x7fffffffu;
    if (ay == 0 || ux == 0x3f800000u) return 1.0f;
    if (ax > 0x7f800000u || ay > 0x7f800000u) return x + y;
    if (ay == 0x7f800000u) { /* y = +-inf */
        if (ax == 0x3f800000u) return 1.0f;
        return ((ax > 0x3f800000u) == !(uy >> 31)) ? __builtin_inff() : 0.0f;
    }
    int odd = scene_math__odd(y);
    int neg = (int)(ux >> 31);
    if (ax == 0 || ax == 0x7f800000u) { /* x = +-0 or +-inf */
        int big = (ax == 0) == (int)(uy >> 31); /* 0^-y, inf^y: infinite */
        float r = big ? __builtin_inff() : 0.0f;
        return (neg && odd) ? -r : r;
    }
    float sign = 1.0f;
    if (neg) {
        if (scene_floorf(y) != y) return __builtin_nanf("");
        if (odd) sign = -1.0f;
    }
    double t = (double)y * scene_math__log_d((double)scene_fabsf(x));
    if (t > 89.0) return sign * __builtin_inff();
    if (t < -105.0) return sign * 0.0f;
    return sign * (float)scene_math__exp_d(t);
}

#ifdef __cplusplus
}
#endif

#endif /* SCENE_MATH_H */
