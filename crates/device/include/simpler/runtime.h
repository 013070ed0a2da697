/*
 * runtime.h - what an orchestration of the original that includes its
 * runtime's `runtime.h` (e.g. generated ones) gets here: the
 * orchestration API (pto_orchestration_api.h), nothing of a runtime's
 * internals.
 */
#ifndef SCENE_SIMPLER_RUNTIME_H
#define SCENE_SIMPLER_RUNTIME_H
#include "pto_orchestration_api.h"
#endif /* SCENE_SIMPLER_RUNTIME_H */
