/*
 * What libbcc's compile asks of /proc/kallsyms, answered without reading it.
 *
 * Every compile (libbcc 0.26, in its clang frontend) loads all of /proc/kallsyms into
 * a sorted table, about 120,000 lines and 150 ms a compile here, only to learn whether
 * the kernel has bpf_probe_read_kernel and bpf_probe_read_user (else it rewrites them
 * to bpf_probe_read). ksyms.c defines libbcc's bcc_procutils_each_ksym in the tool
 * itself, where the dynamic linker finds it before libbcc's own (libbcc calls it
 * through its PLT). Between ksyms_compile_begin and ksyms_compile_end, on that thread,
 * it names just those two helpers if the kernel lets a tracing program call them
 * (asked of the kernel once, by libbpf's helper probe); at other times, on other
 * threads, or when the probe cannot tell, it is libbcc's own.
 */
#ifndef PYEBPF_KSYMS_H
#define PYEBPF_KSYMS_H

void ksyms_compile_begin(void);
void ksyms_compile_end(void);

#endif
