/*
 * Rotary table for one position: for i < half = head_dim / 2,
 *   theta_i = pos * 10000^(-2i / head_dim)
 *   cs[i] = cos(theta_i), cs[half + i] = sin(theta_i)
 * computed in double (own exp/sin/cos, no libm) and rounded to f32.
 *
 * args: cs [head_dim] (out), pos, head_dim
 */
#include "scene_kernel.h"

#define LN_BASE 9.210340371976184   /* ln(10000) */
#define LN2 0.6931471805599453
#define PIO2_HI 1.5707963267341256  /* pi/2 split in two for the reduction */
#define PIO2_LO 6.077100506506192e-11

static inline double round_d(double v) {
    return (double)(int64_t)(v + (v >= 0.0 ? 0.5 : -0.5));
}

static double exp_d(double x) {
    double kd = round_d(x / LN2);
    double r = x - kd * LN2;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i <= 16; ++i) {
        term *= r / (double)i;
        sum += term;
    }
    union { uint64_t u; double d; } s;
    s.u = (uint64_t)((int64_t)kd + 1023) << 52;
    return sum * s.d;
}

/* sin and cos of r for |r| <= pi/4 (Taylor, error < 1e-17). */
static void sincos_small(double r, double *s, double *c) {
    double r2 = r * r;
    double ts = r, tc = 1.0, ss = r, cc = 1.0;
    for (int i = 1; i <= 9; ++i) {
        ts *= -r2 / (double)((2 * i) * (2 * i + 1));
        tc *= -r2 / (double)((2 * i - 1) * (2 * i));
        ss += ts;
        cc += tc;
    }
    *s = ss;
    *c = cc;
}

SCENE_KERNEL_ENTRY(ka) {
    float *cs = SCENE_ARG_PTR(ka, 0, float);
    uint64_t pos = SCENE_ARG_U64(ka, 1);
    uint64_t hd = SCENE_ARG_U64(ka, 2);
    uint64_t half = hd / 2;
    SCENE_FOR_BLOCK_RANGE(ka, half, i) {
        double inv_freq = exp_d(-(double)(2 * i) / (double)hd * LN_BASE);
        double a = (double)pos * inv_freq;
        double q = round_d(a / (PIO2_HI + PIO2_LO));
        double r = (a - q * PIO2_HI) - q * PIO2_LO;
        double s, c;
        sincos_small(r, &s, &c);
        int64_t quad = (int64_t)q & 3;
        double sn, cn;
        if (quad == 0) {
            sn = s; cn = c;
        } else if (quad == 1) {
            sn = c; cn = -s;
        } else if (quad == 2) {
            sn = -s; cn = -c;
        } else {
            sn = -c; cn = s;
        }
        cs[i] = (float)cn;
        cs[half + i] = (float)sn;
    }
}
