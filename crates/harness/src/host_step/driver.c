/*
 * The harness's driver of a C host step (embedded in scene-harness and
 * linked with the scene's host source into one executable per step, the
 * function named by -DSCENE_HOST_ENTRY=<function>).
 *
 * Usage: driver <manifest>. The manifest is text, one line each:
 *   nranks <n>
 *   tensor <name> <dtype> <writable 0|1> <ndim> <dim>... <bytes> <path>
 * (the path is the rest of the line). Every tensor is read from <path>;
 * after the function returned 0 every tensor is written to <path>.out (the
 * harness takes back the writable ones and checks the others unchanged).
 * Failures go to stderr as one line starting "scene-host: " and exit 2.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scene_host.h"

int32_t SCENE_HOST_ENTRY(const SceneHostArgs *args);

#define STR2(x) #x
#define STR(x) STR2(x)

static char missing[1024];
static char failure[4096];

SceneHostTensor *scene_host_tensor(const SceneHostArgs *args, const char *name) {
    if (!args || !name) return NULL;
    for (uint32_t i = 0; i < args->ntensors; i++) {
        if (strcmp(args->tensors[i].name, name) == 0) return &args->tensors[i];
    }
    size_t used = strlen(missing);
    snprintf(missing + used, sizeof missing - used, "%s`%s`", used ? ", " : "", name);
    return NULL;
}

int32_t scene_host_fail(const SceneHostArgs *args, const char *fmt, ...) {
    (void)args;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure, sizeof failure, fmt, ap);
    va_end(ap);
    return -1;
}

static int die(const char *what, const char *detail) {
    fprintf(stderr, "scene-host: %s%s\n", what, detail ? detail : "");
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 2) return die("usage: driver <manifest>", NULL);
    FILE *m = fopen(argv[1], "r");
    if (!m) return die("cannot open the manifest ", argv[1]);
    SceneHostArgs args = {0, 0, NULL};
    char **paths = NULL;
    char line[8192];
    while (fgets(line, sizeof line, m)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "nranks ", 7) == 0) {
            args.nranks = (uint32_t)strtoul(line + 7, NULL, 10);
            continue;
        }
        if (strncmp(line, "tensor ", 7) != 0) return die("bad manifest line: ", line);
        SceneHostTensor t;
        memset(&t, 0, sizeof t);
        char *save = NULL;
        strtok_r(line, " ", &save);
        char *name = strtok_r(NULL, " ", &save);
        char *dtype = strtok_r(NULL, " ", &save);
        char *writable = strtok_r(NULL, " ", &save);
        char *ndim = strtok_r(NULL, " ", &save);
        if (!name || !dtype || !writable || !ndim) return die("bad manifest tensor line", NULL);
        t.name = strdup(name);
        t.dtype = strdup(dtype);
        t.writable = (uint32_t)atoi(writable);
        t.ndim = (uint32_t)strtoul(ndim, NULL, 10);
        if (t.ndim > SCENE_HOST_MAX_DIMS) return die("too many dimensions for ", name);
        for (uint32_t d = 0; d < t.ndim; d++) {
            char *v = strtok_r(NULL, " ", &save);
            if (!v) return die("bad manifest shape for ", name);
            t.shape[d] = strtoull(v, NULL, 10);
        }
        char *bytes = strtok_r(NULL, " ", &save);
        if (!bytes || !save || !*save) return die("bad manifest size or path for ", name);
        t.bytes = strtoull(bytes, NULL, 10);
        char *path = strdup(save);
        t.data = malloc(t.bytes ? t.bytes : 1);
        if (!t.data || !path) return die("out of memory reading ", name);
        FILE *f = fopen(path, "rb");
        if (!f || fread(t.data, 1, t.bytes, f) != t.bytes) return die("cannot read ", path);
        fclose(f);
        args.tensors = realloc(args.tensors, (args.ntensors + 1) * sizeof t);
        paths = realloc(paths, (args.ntensors + 1) * sizeof *paths);
        if (!args.tensors || !paths) return die("out of memory", NULL);
        args.tensors[args.ntensors] = t;
        paths[args.ntensors] = path;
        args.ntensors++;
    }
    fclose(m);
    int32_t rc = SCENE_HOST_ENTRY(&args);
    if (rc != 0) {
        fprintf(stderr, "scene-host: %s returned %d", STR(SCENE_HOST_ENTRY), rc);
        if (failure[0]) fprintf(stderr, ": %s", failure);
        if (missing[0])
            fprintf(stderr, "; it asked for %s, which the step does not declare in `reads` or `writes`",
                    missing);
        fprintf(stderr, "\n");
        return 2;
    }
    for (uint32_t i = 0; i < args.ntensors; i++) {
        char out[8192];
        snprintf(out, sizeof out, "%s.out", paths[i]);
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(args.tensors[i].data, 1, args.tensors[i].bytes, f) != args.tensors[i].bytes ||
            fclose(f) != 0)
            return die("cannot write ", out);
    }
    return 0;
}
