/* A runtime's runtime/ dir is on the path too. */
#pragma once
#define RUNTIME_DIR_SEEN 1
