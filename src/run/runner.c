#include "runner.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "lifecycle.h"
#include "log.h"
#include "jsonfmt.h"

#define MAX_POLLFDS 4096
#define MAX_RUN_TRACKERS 32

static int print_texts(struct tracker *const *trackers, int n)
{
	for (int i = 0; i < n; i++)
		if (trackers[i]->text)
			trackers[i]->ops->bpf->print_text(stdout, trackers[i]->text, &trackers[i]->cflags);
	return EXIT_OK;
}

/* The shortest time any tracker lets a buffered record wait, and no later than the deadline. */
static int poll_timeout_ms(struct tracker *const *trackers, int n, uint64_t deadline_ns)
{
	int ms = 1000;
	uint64_t now;

	for (int i = 0; i < n; i++)
		if (trackers[i]->poll_ms < ms)
			ms = trackers[i]->poll_ms;
	if (!deadline_ns)
		return ms;
	now = time_mono_ns();
	if (now >= deadline_ns)
		return 0;
	return (deadline_ns - now) / 1000000 < (uint64_t)ms ? (int)((deadline_ns - now) / 1000000) + 1 : ms;
}

/*
 * Waits for a wakeup of any tracker's perf buffers, then delivers every tracker's
 * records. Also watches the sink's reader: 1 when it went away (nothing more to do).
 */
static int poll_all(struct tracker *const *trackers, int n, int timeout_ms, int watch_fd)
{
	struct pollfd fds[MAX_POLLFDS];
	int nfds = 0;

	if (watch_fd >= 0)
		fds[nfds++] = (struct pollfd){ .fd = watch_fd, .events = 0 };
	for (int i = 0; i < n; i++)
		if (trackers[i]->prog)
			nfds += trackers[i]->ops->bpf->pollfds(trackers[i]->prog, fds + nfds, MAX_POLLFDS - nfds);
	if (poll(fds, (nfds_t)nfds, timeout_ms) < 0 && errno != EINTR) {
		log_error("polling the BPF output buffers failed: %s", strerror(errno));
		return -1;
	}
	if (watch_fd >= 0 && (fds[0].revents & (POLLERR | POLLHUP)))
		return 1;
	for (int i = 0; i < n; i++)
		if (trackers[i]->prog && trackers[i]->ops->bpf->deliver(trackers[i]->prog) < 0) {
			log_error("%s: reading the ring buffer failed", trackers[i]->ops->name);
			return -1;
		}
	return 0;
}

static bool all_done(struct tracker *const *trackers, int n)
{
	for (int i = 0; i < n; i++)
		if (!trackers[i]->done)
			return false;
	return true;
}

/* Whether any tracker compiles BPF (a run of trackers without it needs no privileges). */
static bool any_bpf(struct tracker *const *trackers, int n)
{
	for (int i = 0; i < n; i++)
		if (trackers[i]->ops->bpf && !trackers[i]->stored)
			return true;
	return false;
}

static int loop(struct tracker *const *trackers, int n, uint64_t deadline_ns, struct sink *sink)
{
	int watch_fd = sink_watch_fd(sink), r;

	while (!lifecycle_signal() && sink_status(sink) == 0) {
		uint64_t now;

		r = poll_all(trackers, n, poll_timeout_ms(trackers, n, deadline_ns), watch_fd);
		if (r)
			return r < 0 ? -1 : 0; /* an error, or nobody reads the results any more */
		now = time_mono_ns();
		for (int i = 0; i < n; i++)
			if (trackers[i]->ops->tick && trackers[i]->ops->tick(trackers[i], now))
				return -1;
		/* what a batching sink holds waits no longer than one poll */
		sink_flush(sink);
		if (all_done(trackers, n) || (deadline_ns && now >= deadline_ns))
			break;
	}
	return 0;
}

/* Every tracker's attachments end together (the kernel's waits for each overlap). */
static void detach_all(struct tracker *const *trackers, int n)
{
	struct bpfprog *progs[MAX_RUN_TRACKERS];
	const struct bpfprog_runtime *bpf = NULL;
	int k = 0;

	for (int i = 0; i < n; i++)
		if (trackers[i]->prog) {
			progs[k++] = trackers[i]->prog;
			bpf = trackers[i]->ops->bpf;
		}
	if (bpf)
		bpf->detach_all(progs, k);
}

static void say_started(struct tracker *const *trackers, int n)
{
	for (int i = 0; i < n; i++)
		if (!trackers[i]->stored) /* it read what it draws already: nothing to end */
			log_info("%s%s", trackers[i]->banner, i == n - 1 ? " Hit Ctrl-C to end." : "");
}

/* Each tracker's text into its prog (NULL when its compile failed), the compiles at once. */
static void compile_all(struct tracker *const *trackers, int n, const char *kernel_headers)
{
	const char *texts[MAX_RUN_TRACKERS];
	const struct cflags *cfs[MAX_RUN_TRACKERS];
	struct bpfprog *progs[MAX_RUN_TRACKERS];
	const struct bpfprog_runtime *bpf = NULL;
	uint64_t t0 = time_mono_ns();
	int k = 0;

	for (int i = 0; i < n; i++)
		if (trackers[i]->text) {
			bpf = trackers[i]->ops->bpf; /* one runtime for all: the library's */
			texts[k] = trackers[i]->text;
			cfs[k++] = &trackers[i]->cflags;
		}
	if (!k)
		return;
	bpf->compile_many(texts, cfs, k, kernel_headers, progs);
	k = 0;
	for (int i = 0; i < n; i++)
		if (trackers[i]->text)
			trackers[i]->prog = progs[k++];
	log_debug("%d BPF programs compiled in %.0f ms", k, (time_mono_ns() - t0) / 1e6);
}

/*
 * Tracker i could not prepare, compile or start. Strict: the run fails. Lenient
 * (runner_run_each): a warning naming it, it leaves the run (its caller frees it),
 * and the others go on; false when none is left, or when a capability was missing
 * (caps_error): then the run fails too.
 */
static bool leave(struct tracker **trackers, int *n, int *i, bool lenient, const char *what)
{
	if (!lenient)
		return false;
	/* a missing capability is the deployment's mistake: said, and the run fails (not a warning) */
	if (caps_errors()) {
		log_error("%s could not %s for want of that capability", trackers[*i]->ops->name, what);
		return false;
	}
	log_warn("%s could not %s: running without it", trackers[*i]->ops->name, what);
	memmove(trackers + *i, trackers + *i + 1, (size_t)(*n - *i - 1) * sizeof(*trackers));
	(*n)--;
	(*i)--;
	return *n > 0;
}

static int run(struct tracker *const *all, int n, struct sink *sink, const struct common_opts *common,
	       bool lenient)
{
	struct tracker *trackers[MAX_RUN_TRACKERS];
	uint64_t deadline_ns = 0;
	int rc = EXIT_RUNTIME;

	schema_wide = common->wide;
	if (n > MAX_RUN_TRACKERS) {
		log_error("too many trackers in one run (at most %d)", MAX_RUN_TRACKERS);
		return EXIT_RUNTIME;
	}
	memcpy(trackers, all, (size_t)n * sizeof(*trackers));

	if (common->print_fields) {
		schema_print_header(stdout);
		for (int i = 0; i < n; i++)
			schema_print(stdout, trackers[i]->ops->schemas);
		return EXIT_OK;
	}
	if (!common->print_ebpf && any_bpf(trackers, n) && lifecycle_check_privileges())
		return EXIT_RUNTIME;
	for (int i = 0; i < n; i++)
		if (trackers[i]->ops->prepare(trackers[i]) && !leave(trackers, &n, &i, lenient, "inspect its targets"))
			return EXIT_RUNTIME;
	for (int i = 0; i < n; i++)
		if (trackers[i]->text && !trackers[i]->ops->bpf) { /* against tracker.h: a bug */
			log_error("%s: BPF text without a BPF runtime (ops.bpf)", trackers[i]->ops->name);
			return EXIT_RUNTIME;
		}
	if (common->print_ebpf)
		return print_texts(trackers, n);

	compile_all(trackers, n, common->kernel_headers);
	for (int i = 0; i < n; i++)
		if (trackers[i]->text && !trackers[i]->prog && !leave(trackers, &n, &i, lenient, "compile its BPF program"))
			return EXIT_RUNTIME;
	/* signals before attaching: a Ctrl-C during start still ends the run cleanly */
	lifecycle_install_signals();
	for (int i = 0; i < n; i++) {
		uint64_t t0 = time_mono_ns();

		if (trackers[i]->ops->start(trackers[i])) {
			if (!leave(trackers, &n, &i, lenient, "attach"))
				return EXIT_RUNTIME;
			continue;
		}
		trackers[i]->cpu_start_us = time_self_cpu_us();
		log_debug("%s: started in %.0f ms", trackers[i]->ops->name, (time_mono_ns() - t0) / 1e6);
	}
	if (common->duration_s)
		deadline_ns = time_mono_ns() + (uint64_t)(common->duration_s * 1e9);
	say_started(trackers, n);

	if (loop(trackers, n, deadline_ns, sink) == 0)
		rc = EXIT_OK;
	/* no program runs past the last read: the summaries count what was printed */
	detach_all(trackers, n);
	for (int i = 0; i < n; i++)
		if (trackers[i]->prog)
			trackers[i]->ops->bpf->deliver(trackers[i]->prog);
	for (int i = 0; i < n; i++)
		if (trackers[i]->ops->finish)
			trackers[i]->ops->finish(trackers[i]);
	for (int i = 0; i < n; i++)
		if (trackers[i]->failed)
			rc = EXIT_RUNTIME;
	return rc;
}

/* run with every tracker's records going to sink, and no tracker keeping it after */
static int run_into(struct tracker *const *trackers, int n, struct sink *sink, const struct common_opts *common,
		    bool lenient)
{
	int rc;

	for (int i = 0; i < n; i++)
		trackers[i]->sink = sink;
	rc = run(trackers, n, sink, common, lenient);
	for (int i = 0; i < n; i++)
		trackers[i]->sink = NULL;
	return rc;
}

int runner_run(struct tracker *const *trackers, int n, struct sink *sink, const struct common_opts *common)
{
	return run_into(trackers, n, sink, common, false);
}

int runner_run_each(struct tracker *const *trackers, int n, struct sink *sink,
		    const struct common_opts *common)
{
	return run_into(trackers, n, sink, common, true);
}
