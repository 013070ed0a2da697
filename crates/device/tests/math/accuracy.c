/*
 * Accuracy of scene_math.h against host libm (crates/device/tests/math.rs
 * builds it with `cc -O2` and asserts the bounds; docs/scene-format.md shows
 * the table). For each function: a sweep of every 2048th float bit pattern and its neighbour
 * (all exponents and both signs: denormals, +-0, +-inf, NaNs), a dense
 * uniform sweep over the range where the function is not trivial, and a
 * list of edge values; powf gets random pairs, a dense grid and every pair
 * of special values.
 *
 * Output, one line per function:
 *   name points max_ulp worst_x worst_y max_ulp_subnormal max_rel max_abs specials detail
 * max_ulp is over results whose exact value is a normal float (ulp of the
 * exact value rounded to float); max_ulp_subnormal over subnormal results
 * (ulp 2^-149); max_rel is the relative error over normal results, max_abs
 * the absolute error over results of magnitude <= 1. `specials` counts results of the wrong class: NaN for a
 * number or the reverse, an infinity for a finite result or the reverse, or
 * a zero of the wrong sign where the sign is specified.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_math.h"

typedef struct {
    const char *name;
    long points;
    double max_ulp, max_ulp_sub, max_rel, max_abs;
    float worst_x, worst_y;
    long specials;
    char detail[160];
    int signed_zero; /* the sign of a zero result is specified */
} Stat;

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static double ulp_of(double ref) {
    double a = fabs(ref);
    if (a < FLT_MIN) return ldexp(1.0, -149);
    if (a >= FLT_MAX) return ldexp(1.0, 104);
    int e;
    frexp(a, &e);
    return ldexp(1.0, e - 24);
}

static void check(Stat *s, float got, double ref, float x, float y) {
    s->points++;
    float rf = (float)ref;
    int bad = 0;
    if (isnan(ref) || isnan(got)) {
        bad = !(isnan(ref) && isnan(got));
    } else if (isinf(rf) || isinf(got)) {
        bad = !(got == rf);
    } else if (rf == 0.0f && got == 0.0f) {
        bad = s->signed_zero && (signbit(rf) != signbit(got)) && ref == 0.0;
    } else {
        double err = fabs((double)got - ref);
        double u = err / ulp_of(ref);
        if (fabs(ref) >= FLT_MIN) {
            if (u > s->max_ulp) { s->max_ulp = u; s->worst_x = x; s->worst_y = y; }
        } else if (u > s->max_ulp_sub) {
            s->max_ulp_sub = u;
        }
        if (fabs(ref) >= FLT_MIN && err / fabs(ref) > s->max_rel) s->max_rel = err / fabs(ref);
        if (fabs(ref) <= 1.0 && err > s->max_abs) s->max_abs = err;
    }
    if (bad) {
        if (s->specials == 0)
            snprintf(s->detail, sizeof s->detail, "x=%a y=%a got=%a ref=%a", x, y, got, ref);
        s->specials++;
    }
}

static void report(const Stat *s) {
    printf("%s %ld %.4f %a %a %.4f %.3e %.3e %ld %s\n", s->name, s->points, s->max_ulp, s->worst_x,
           s->worst_y, s->max_ulp_sub, s->max_rel, s->max_abs, s->specials, s->specials ? s->detail : "-");
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((next() >> 8) * (1.0 / 16777216.0)); }

typedef float (*F1)(float);
typedef double (*R1)(double);

static double r_rsqrt(double x) { return 1.0 / sqrt(x); }
static double r_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double r_silu(double x) { return x == -INFINITY ? -0.0 : x / (1.0 + exp(-x)); }
static double r_gelu(double x) {
    if (isinf(x)) return x > 0 ? x : -0.0; /* the limits; the formula gives inf/inf */
    double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}
static double r_fabs(double x) { return fabs(x); }
static double r_floor(double x) { return floor(x); }
static double r_ceil(double x) { return ceil(x); }

static const float EDGES[] = {
    0.0f, -0.0f, 1e-45f, -1e-45f, 1.17549435e-38f, -1.17549435e-38f, 1.1754942e-38f, -1.1754942e-38f,
    FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f,
    88.72283935546875f, 88.7228470f, 88.3762626647949f, -87.3365478515625f, -103.972084045410156f, -103.97207f,
    -104.0f, 0.55f, -0.55f, 9.1f, 1e-4f, 3.9999998f, 4.0f, 10.0f, -10.0f, 10.9f, -10.9f, 0.99999994f,
    1.0000001f, 8388608.0f, -8388608.0f, 8388607.5f, -8388607.5f, 1.5f, -1.5f, 0.3465736f,
};
#define NEDGES (sizeof EDGES / sizeof EDGES[0])

static void unary(const char *name, F1 f, R1 r, float lo, float hi, int signed_zero) {
    Stat s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.signed_zero = signed_zero;
    for (uint64_t u = 0; u < (1ull << 32); u += 2048) {
        float x = from_bits((uint32_t)u);
        check(&s, f(x), r(x), x, 0);
        float x1 = from_bits((uint32_t)u + 1u); /* the pattern's neighbour: odd mantissas */
        check(&s, f(x1), r(x1), x1, 0);
    }
    for (int i = 0; i < 1000000; i++) {
        float x = uniform(lo, hi);
        check(&s, f(x), r(x), x, 0);
    }
    for (size_t i = 0; i < NEDGES; i++) check(&s, f(EDGES[i]), r(EDGES[i]), EDGES[i], 0);
    report(&s);
}

typedef float (*F2)(float, float);
typedef double (*R2)(double, double);

static void binary(const char *name, F2 f, R2 r, int signed_zero, int pow_like) {
    Stat s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.signed_zero = signed_zero;
    for (int i = 0; i < 3000000; i++) { /* random bit patterns */
        float x = from_bits(next() ^ (next() << 16)), y;
        if (pow_like) {
            x = from_bits((next() & 0x7fffffffu) % 0x7f800001u);
            y = (i & 1) ? uniform(-40.0f, 40.0f) : uniform(-2.0f, 2.0f);
            if ((i & 7) == 0) { x = -x; y = (float)(int)uniform(-60.0f, 60.0f); }
        } else {
            y = from_bits(next() ^ (next() << 16));
        }
        check(&s, f(x, y), r(x, y), x, y);
    }
    for (int i = 0; i < 1000000; i++) { /* dense where results are finite and not trivial */
        float x = uniform(-8.0f, 8.0f), y = uniform(-30.0f, 30.0f);
        if (pow_like) x = uniform(0.0f, 4.0f);
        check(&s, f(x, y), r(x, y), x, y);
    }
    for (size_t i = 0; i < NEDGES; i++)
        for (size_t j = 0; j < NEDGES; j++) check(&s, f(EDGES[i], EDGES[j]), r(EDGES[i], EDGES[j]), EDGES[i], EDGES[j]);
    static const float ys[] = {3.0f, -3.0f, 2.0f, -2.0f, 0.5f, -0.5f, 16777216.0f, -16777215.0f, 16777215.0f};
    for (size_t i = 0; i < NEDGES; i++)
        for (size_t j = 0; j < sizeof ys / sizeof ys[0]; j++) check(&s, f(EDGES[i], ys[j]), r(EDGES[i], ys[j]), EDGES[i], ys[j]);
    report(&s);
}

static float w_expf(float x) { return scene_expf(x); }
static float w_logf(float x) { return scene_logf(x); }
static float w_sqrtf(float x) { return scene_sqrtf(x); }
static float w_rsqrtf(float x) { return scene_rsqrtf(x); }
static float w_tanhf(float x) { return scene_tanhf(x); }
static float w_sigmoidf(float x) { return scene_sigmoidf(x); }
static float w_siluf(float x) { return scene_siluf(x); }
static float w_geluf(float x) { return scene_geluf(x); }
static float w_erff(float x) { return scene_erff(x); }
static float w_fabsf(float x) { return scene_fabsf(x); }
static float w_floorf(float x) { return scene_floorf(x); }
static float w_ceilf(float x) { return scene_ceilf(x); }
static float w_powf(float x, float y) { return scene_powf(x, y); }
static float w_fminf(float x, float y) { return scene_fminf(x, y); }
static float w_fmaxf(float x, float y) { return scene_fmaxf(x, y); }

static int wanted(int argc, char **argv, const char *name) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

int main(int argc, char **argv) {
#define U(name, lo, hi, sz) if (wanted(argc, argv, #name)) unary(#name, w_##name, r_##name, lo, hi, sz)
#define r_expf exp
#define r_logf log
#define r_sqrtf sqrt
#define r_rsqrtf r_rsqrt
#define r_tanhf tanh
#define r_sigmoidf r_sigmoid
#define r_siluf r_silu
#define r_geluf r_gelu
#define r_erff erf
#define r_fabsf r_fabs
#define r_floorf r_floor
#define r_ceilf r_ceil
    U(expf, -104.0f, 89.0f, 1);
    U(logf, 0.0f, 4.0f, 1);
    U(sqrtf, 0.0f, 4.0f, 1);
    U(rsqrtf, 0.0f, 4.0f, 1);
    U(tanhf, -10.0f, 10.0f, 1);
    U(sigmoidf, -20.0f, 20.0f, 1);
    U(siluf, -20.0f, 20.0f, 1);
    U(geluf, -12.0f, 12.0f, 1);
    U(erff, -5.0f, 5.0f, 1);
    U(fabsf, -4.0f, 4.0f, 1);
    U(floorf, -1e7f, 1e7f, 1);
    U(ceilf, -1e7f, 1e7f, 1);
    if (wanted(argc, argv, "powf")) binary("powf", w_powf, pow, 1, 1);
    /* fmin/fmax of +0 and -0 may return either in libm. */
    if (wanted(argc, argv, "fminf")) binary("fminf", w_fminf, fmin, 0, 0);
    if (wanted(argc, argv, "fmaxf")) binary("fmaxf", w_fmaxf, fmax, 0, 0);
    return 0;
}
