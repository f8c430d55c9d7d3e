/* What the running kernel's BPF verifier accepts, asked of it once. */
#ifndef PYEBPF_KFEATURES_H
#define PYEBPF_KFEATURES_H

#include <stdbool.h>

/*
 * Whether a tracing program may use the may_goto instruction (Linux 6.9 and later):
 * a three-instruction program is loaded once and the answer kept. False when the
 * load fails for any reason (an older kernel, no CAP_BPF).
 */
bool kfeatures_may_goto(void);

#endif
