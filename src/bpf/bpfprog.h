/*
 * A BPF program compiled by libbcc from embedded text, its attachments and its
 * output buffers. Every attachment is an fd, so a killed tool leaves nothing behind.
 */
#ifndef PYEBPF_BPFPROG_H
#define PYEBPF_BPFPROG_H

#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <sys/types.h>

#include "cflags.h"

/* --ebpf: the cflags as comments, then the text. */
void bpfprog_print_text(FILE *f, const char *text, const struct cflags *cf);

struct bpfprog;

/*
 * Finds kernel headers (kheaders.h, says which on stderr), mounts tracefs if
 * the text has tracepoint programs and it is missing, and compiles. libbcc's own stdout messages are sent to stderr. Returns
 * NULL after an error message.
 */
struct bpfprog *bpfprog_compile(const char *text, const struct cflags *cf,
				const char *kernel_headers);
void bpfprog_close(struct bpfprog *p);
/*
 * bpfprog_compile of n texts (cfs[i] for texts[i]) into out[i] (NULL: that compile
 * failed, and said why). With several CPUs each compiles in a child process of its
 * own, as many at once as there are CPUs (at most 4), and sends back its maps and
 * instructions (bpfobj.h): libbcc cannot compile in two threads of a process at once,
 * and one compile is mostly LLVM's work on one CPU.
 */
void bpfprog_compile_many(const char *const *texts, const struct cflags *const *cfs, int n,
			  const char *kernel_headers, struct bpfprog **out);

/*
 * What the runner needs of the BPF runtime, as a table a tracker points to
 * (tracker_ops.bpf) rather than calls: a tool whose tracker has no BPF (hostnet)
 * then links none of it, nor libbcc and LLVM, which would cost it 60 MiB and half a
 * second at start-up.
 */
struct bpfprog_runtime {
	struct bpfprog *(*compile)(const char *text, const struct cflags *cf, const char *kernel_headers);
	void (*compile_many)(const char *const *texts, const struct cflags *const *cfs, int n,
			     const char *kernel_headers, struct bpfprog **out);
	void (*print_text)(FILE *f, const char *text, const struct cflags *cf);
	int (*pollfds)(struct bpfprog *p, struct pollfd *fds, int max);
	int (*deliver)(struct bpfprog *p);
	void (*detach_all)(struct bpfprog *const *ps, int n);
	void (*close)(struct bpfprog *p);
};
extern const struct bpfprog_runtime bpfprog_runtime;

/* Each returns 0, or -1 after an error message naming the hook. */
/* Function tracepoint__CATEGORY__NAME, as BCC names it. */
int bpfprog_attach_tracepoint(struct bpfprog *p, const char *category, const char *name);
int bpfprog_attach_raw_tracepoint(struct bpfprog *p, const char *fn, const char *tp);
/*
 * Whether uprobes can be attached (CAP_SYS_ADMIN): 0, or -1 after saying (once) that
 * it is missing. For a tracker that plans uprobes, before its compile.
 */
int bpfprog_check_uprobe_caps(void);
/* offset: file offset in binary (bcc_resolve_symname gives one); pid -1 for all. */
int bpfprog_attach_uprobe(struct bpfprog *p, const char *fn, const char *binary, uint64_t offset,
			  pid_t pid, bool retprobe, uint32_t ref_ctr_offset);
/* Sampling on every online CPU: type/config as perf_event_attr, freq in Hz; pid -1 for all. */
int bpfprog_attach_perf_event(struct bpfprog *p, const char *fn, uint32_t type, uint64_t config,
			      uint64_t freq, pid_t pid);
/*
 * A cpu-clock event on every online CPU (at most max) that samples every period_ns,
 * with fn attached; their fds (owned by p) into fds, for PERF_EVENT_IOC_PERIOD.
 * Returns how many, or -1.
 */
int bpfprog_attach_cpu_clock(struct bpfprog *p, const char *fn, uint64_t period_ns, int *fds, int max);
int bpfprog_attachments(const struct bpfprog *p);
/*
 * Ends every attachment: no program of p runs from now on, and what its buffers and
 * maps hold stays to be read (a run's last records and counters then agree).
 */
void bpfprog_detach(struct bpfprog *p);
/*
 * The same for n programs (NULL ones skipped) at once: their attachments end together,
 * from several threads, which takes about as long as ending one (their waits for the
 * kernel overlap); those made after a bpfprog_detach_later() end after the others.
 */
void bpfprog_detach_all(struct bpfprog *const *ps, int n);
/*
 * Attachments made from now on end after those made before, in bpfprog_detach_all():
 * e.g. a program whose records need what a later-attached one keeps up to date.
 */
void bpfprog_detach_later(struct bpfprog *p);

/* data is 8-byte aligned: it may be read as the event struct directly */
typedef void (*bpfprog_event_cb)(void *ctx, void *data, int size);
/*
 * Opens a BPF_PERF_OUTPUT table on every online CPU; pages must be a power of two. The
 * kernel wakes the reader once per wakeup_events records: a wakeup is an interrupt in
 * the traced code's context, and a reader woken per record also makes the scheduler
 * switch tasks at the events (for a sampler, at the sampling instants, which biases
 * whom the samples land on). Records short of that mark wait for the next
 * bpfprog_deliver() (the runner calls it after every poll).
 */
int bpfprog_open_perf_buffer(struct bpfprog *p, const char *table, bpfprog_event_cb cb, void *ctx,
			     int pages, int wakeup_events);
/*
 * Opens the BPF_RINGBUF_OUTPUT table (pyebpf.bpf.h's events with -DPYEBPF_RINGBUF_PAGES):
 * one buffer for all CPUs, records in the order they were written. emit_event() never
 * wakes the reader (a wakeup is an interrupt where the event happened, and under a
 * connect storm they made the kernel skip several times more of our program runs), so
 * bpfprog_deliver() reads it after every poll (at most poll_ms apart). One per program.
 */
int bpfprog_open_ring_buffer(struct bpfprog *p, const char *table, bpfprog_event_cb cb, void *ctx);
/*
 * The fds to poll for a perf buffer's wakeup (at most max); returns how many. The
 * ring buffer has none: it is read at every bpfprog_deliver().
 */
int bpfprog_pollfds(struct bpfprog *p, struct pollfd *fds, int max);
/*
 * Delivers everything buffered to the callbacks: also records below a perf
 * buffer's wakeup mark, and the ring. Returns 0, or -1 when the ring is corrupt.
 */
int bpfprog_deliver(struct bpfprog *p);
/*
 * Records lost on the way out: the perf buffers' lost counts, or (larger, because the
 * kernel reports perf loss only when the next record fits) the "events_lost" counter
 * that emit_event() in pyebpf.bpf.h keeps.
 */
uint64_t bpfprog_lost(struct bpfprog *p);
/*
 * Hits the kernel did not run this tool's programs for, summed over them (the
 * recursion_misses of each program's fdinfo, kernel 6.7 and later; 0 before): a
 * tracepoint or uprobe that fires while any BPF tracing program runs on the same CPU,
 * e.g. a softirq interrupting a program in a system call, is skipped. What those hits
 * would have reported is lost without a record. A raw tracepoint program is skipped
 * only while it runs itself; a hook whose program NAME has a backup NAME__backup,
 * which takes over the hits NAME was skipped for and counts them in the per-CPU u64
 * table "backup_recovered", loses only what neither saw (tcploss.bpf.c, hit_seen).
 */
uint64_t bpfprog_missed(struct bpfprog *p);

int bpfprog_table_fd(struct bpfprog *p, const char *name);
/* Sum of a BPF_PERCPU_ARRAY of u64 at index key, or of a BPF_ARRAY's u64. */
uint64_t bpfprog_table_sum_u64(struct bpfprog *p, const char *name, uint32_t key);
/* The loaded program's fd (loading it on first use), or -1. */
int bpfprog_prog_fd(struct bpfprog *p, const char *fn, int prog_type);

/* Online CPU numbers into cpus (at most max); returns how many. */
int cpus_online(int *cpus, int max);

#endif
