/* The a2a3 platform headers. */
#pragma once
#define ARCH_TAG 1
