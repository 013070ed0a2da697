/*
 * The host step of l3_host_dependency (simpler's SubTask): it runs once,
 * on the host, after every rank's produce_f, and sees every rank's slice
 * of f (rank-major): g[r][i] = f[r][i] - (mean over ranks of f[.][i]).
 */
#include "scene_host.h"

SCENE_HOST_FUNCTION(center, args) {
    const SceneHostTensor *f = scene_host_tensor(args, "f");
    SceneHostTensor *g = scene_host_tensor(args, "g");
    if (!f || !g) return -1;
    if (f->ndim != 2 || g->bytes != f->bytes || f->shape[0] != args->nranks)
        return scene_host_fail(args, "f and g must be [nranks, N] of the same size");
    const float *fp = (const float *)f->data;
    float *gp = (float *)g->data;
    uint64_t nr = f->shape[0], n = f->shape[1];
    for (uint64_t i = 0; i < n; i++) {
        float sum = 0.0f;
        for (uint64_t r = 0; r < nr; r++) sum += fp[r * n + i];
        float mean = sum / (float)nr;
        for (uint64_t r = 0; r < nr; r++) {
            gp[r * n + i] = fp[r * n + i] - mean;
        }
    }
    return 0;
}
